package config

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

const smallDoc = `{"schema":"sluice.dev/enforcer-config/v1","namespace":"shop","policies":[]}`

func gzipped(data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return buf.Bytes()
}

func TestCompressIsDeterministicAndDecodes(t *testing.T) {
	g := NewWithT(t)
	doc := []byte(smallDoc)
	g.Expect(Compress(doc)).To(Equal(Compress(doc)), "an unchanged configuration rewrites nothing")
	out, err := Decode(Compress(doc))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(doc))
	plain, err := Decode(doc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain).To(Equal(doc), "plain JSON is read as it is")
	c, err := Parse(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Hash()).To(Equal(HashJSON(doc)), "the hash is the JSON's, compressed or not")
}

// A broken or hostile compressed document is an error that says so, and
// never makes the reader hold more than MaxDocumentBytes.
func TestDecodeRefusesBadCompressedData(t *testing.T) {
	bomb := gzipped(make([]byte, MaxDocumentBytes+1)) // 16 MiB of zeros: about 16 KiB compressed
	good := Compress([]byte(smallDoc))
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-6] ^= 0xff // the CRC-32 of the trailer
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"inflates past the bound", "is over 16777216 bytes", bomb},
		{"truncated", "unexpected EOF", good[:len(good)/2]},
		{"checksum mismatch", "checksum", corrupt},
		{"only the magic", "unexpected EOF", []byte{0x1f, 0x8b}},
		{"trailing data", "trailing data", append(bytes.Clone(good), "{}"...)},
		{"a second stream", "trailing data", append(bytes.Clone(good), good...)},
		{"plain past the bound", "is over 16777216 bytes", bytes.Repeat([]byte(" "), MaxDocumentBytes+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Decode(tc.data)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	_, err := Decode(bomb)
	NewWithT(t).Expect(errors.Is(err, ErrDocumentTooLarge)).To(BeTrue())
}

// Load reads config.json, else config.json.gz beside it: the ConfigMap
// holds one of the two keys.
func TestLoadReadsEitherFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")

	_, err := Load(path)
	g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "neither file: the enforcer waits for one")
	g.Expect(err).To(MatchError(ContainSubstring("config.json: no such file")))

	g.Expect(os.WriteFile(path+CompressedSuffix, Compress([]byte(smallDoc)), 0o600)).To(Succeed())
	c, err := Load(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Namespace).To(Equal("shop"))

	g.Expect(os.WriteFile(path+CompressedSuffix, []byte{0x1f, 0x8b, 8, 0, 0}, 0o600)).To(Succeed())
	_, err = Load(path)
	g.Expect(err).To(MatchError(ContainSubstring("config.json.gz: decompress")))
	g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeFalse(), "a broken file is an error, not a missing one")

	g.Expect(os.WriteFile(path, []byte(smallDoc), 0o600)).To(Succeed())
	_, err = Load(path)
	g.Expect(err).NotTo(HaveOccurred(), "the file named is read first")
}

func TestDocumentIn(t *testing.T) {
	g := NewWithT(t)
	doc, err := DocumentIn(map[string]string{"config.json": smallDoc}, nil, "config.json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(doc)).To(Equal(smallDoc))
	doc, err = DocumentIn(nil, map[string][]byte{"config.json.gz": Compress([]byte(smallDoc))}, "config.json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(doc)).To(Equal(smallDoc))
	_, err = DocumentIn(nil, map[string][]byte{"config.json.gz": []byte("not gzip")}, "config.json")
	g.Expect(err).To(HaveOccurred(), "binaryData is compressed or an error")
	_, err = DocumentIn(map[string]string{"other": "x"}, nil, "config.json")
	g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue())
}
