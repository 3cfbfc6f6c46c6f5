package proxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
)

// chatAnswer is an OpenAI chat completion of about size bytes whose usage
// reports total tokens, after a long message as a model writes it.
func chatAnswer(size, total int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"`)
	const text = `The \"usage\" of a model, {like} this: caf\u00e9 [1]\n`
	for b.Len() < size-200 {
		b.WriteString(text)
	}
	fmt.Fprintf(&b, `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		total/5, total-total/5, total)
	return b.Bytes()
}

// chatStream is an OpenAI event stream of about size bytes, one token an
// event, whose last event before [DONE] reports total tokens.
func chatStream(size, total int) []byte {
	var b bytes.Buffer
	const event = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o",` +
		`"choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"usage":null}` + "\n\n"
	for b.Len() < size-300 {
		b.WriteString(event)
	}
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\ndata: [DONE]\n\n",
		total/5, total-total/5, total)
	return b.Bytes()
}

// gzipped is b gzip-encoded.
func gzipped(b []byte) []byte {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return z.Bytes()
}

// padded is a JSON answer whose usage comes before a long field, the
// order some servers write.
func padded(size, total int) []byte {
	return []byte(fmt.Sprintf(`{"usage":{"total_tokens":%d},"pad":"%s"}`, total, strings.Repeat("a", size)))
}
