package config

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MaxDocumentBytes bounds a configuration document as read, plain or once
// inflated: a broken or hostile gzip stream cannot make a reader hold more.
// The manager refuses to publish a larger one (about 170,000 overrides or
// 19,000 policies in one namespace).
const MaxDocumentBytes = 16 << 20

// CompressedSuffix ends the name of a document stored gzip-compressed:
// config.json.gz beside config.json. Compression is an encoding of the
// same document: its hash is that of the JSON.
const CompressedSuffix = ".gz"

// gzipMagic starts every gzip stream; no JSON document starts with it.
var gzipMagic = []byte{0x1f, 0x8b}

// ErrDocumentTooLarge is a document over MaxDocumentBytes.
var ErrDocumentTooLarge = fmt.Errorf("the configuration is over %d bytes", MaxDocumentBytes)

// Compress gzips doc. The same doc always yields the same bytes (no name,
// no time in the header), so an unchanged configuration rewrites nothing.
func Compress(doc []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level: cannot fail
	_, _ = zw.Write(doc)                                     // a bytes.Buffer does not fail
	_ = zw.Close()
	return buf.Bytes()
}

// Decode returns the JSON document data holds: data itself, or, when it is
// a gzip stream, what it inflates to, at most MaxDocumentBytes.
func Decode(data []byte) ([]byte, error) {
	if bytes.HasPrefix(data, gzipMagic) {
		return Inflate(data)
	}
	if len(data) > MaxDocumentBytes {
		return nil, ErrDocumentTooLarge
	}
	return data, nil
}

// Inflate returns what the gzip stream data inflates to, at most
// MaxDocumentBytes; anything but one whole gzip stream is an error.
func Inflate(data []byte) ([]byte, error) {
	// A bytes.Reader is an io.ByteReader, so gzip reads no byte past its
	// stream: what is left after it is trailing data.
	in := bytes.NewReader(data)
	zr, err := gzip.NewReader(in)
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	zr.Multistream(false) // one stream: bytes after it are an error below
	doc, err := io.ReadAll(io.LimitReader(zr, MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(doc) > MaxDocumentBytes {
		return nil, fmt.Errorf("decompress: %w", ErrDocumentTooLarge)
	}
	if in.Len() > 0 {
		return nil, fmt.Errorf("decompress: %d bytes of trailing data after the gzip stream", in.Len())
	}
	return doc, nil
}

// ReadDocument reads the document at path, or, when there is no such file,
// at path+CompressedSuffix: a ConfigMap volume holds one of the two keys.
// When neither exists, the error is path's (fs.ErrNotExist).
func ReadDocument(path string) ([]byte, error) {
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		compressed, cerr := readBounded(path + CompressedSuffix)
		if cerr == nil {
			data, err, path = compressed, nil, path+CompressedSuffix
		} else if !errors.Is(cerr, fs.ErrNotExist) {
			err, path = cerr, path+CompressedSuffix
		}
	}
	if err != nil {
		return nil, err
	}
	decode := Decode
	if strings.HasSuffix(path, CompressedSuffix) {
		decode = Inflate
	}
	doc, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// DocumentIn returns the document a ConfigMap's data or binaryData holds
// under key, or under key+CompressedSuffix; fs.ErrNotExist when neither.
func DocumentIn(data map[string]string, binaryData map[string][]byte, key string) ([]byte, error) {
	if doc, ok := data[key]; ok {
		return Decode([]byte(doc))
	}
	if compressed, ok := binaryData[key+CompressedSuffix]; ok {
		return Inflate(compressed)
	}
	return nil, fmt.Errorf("no key %s or %s: %w", key, key+CompressedSuffix, fs.ErrNotExist)
}

// readBounded reads the file at path, refusing one over MaxDocumentBytes
// without reading it all.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxDocumentBytes {
		return nil, fmt.Errorf("%s: %w", path, ErrDocumentTooLarge)
	}
	return data, nil
}
