package stack

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeVolume makes dir hold exactly files (name -> content) the way the
// kubelet updates ConfigMap and downward API volumes: the files live in a
// timestamped directory, `..data` is a symlink to it, and each name is a
// symlink through `..data`. An update writes a new directory and renames a
// new `..data` over the old one, so a reader sees the old set or the new,
// never a mix. It does nothing when the files are already there.
func writeVolume(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if volumeHolds(dir, files) {
		return nil
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts := filepath.Join(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05.")+strconv.FormatInt(time.Now().UnixNano()%1e9, 10))
	if err := os.Mkdir(ts, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ts, name), data, 0o644); err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") {
			if _, keep := files[e.Name()]; !keep {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

// volumeHolds reports whether dir's current files are exactly files; a
// volume that cannot be read holds nothing.
func volumeHolds(dir string, files map[string][]byte) bool {
	data := filepath.Join(dir, "..data")
	entries, err := os.ReadDir(data)
	if err != nil || len(entries) != len(files) {
		return false
	}
	for _, e := range entries {
		want, ok := files[e.Name()]
		if !ok {
			return false
		}
		got, err := os.ReadFile(filepath.Join(data, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}

// downwardLabels renders labels as the downward API writes metadata.labels:
// one key="value" line per label, sorted, values quoted Go-style.
func downwardLabels(labels map[string]string) []byte {
	var b bytes.Buffer
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	return b.Bytes()
}
