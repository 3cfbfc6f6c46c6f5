package erlconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// RuntimeDir is the folder envoyproxy/ratelimit reads its files from:
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY ("config" when
// appDir is empty).
func RuntimeDir(root, subdir, appDir string) string {
	if appDir == "" {
		appDir = "config"
	}
	return filepath.Join(root, subdir, appDir)
}

// LoadOptions say which files of a folder are read and how they compile.
type LoadOptions struct {
	Options
	// IgnoreDotFiles skips files and folders whose name starts with '.'
	// (RUNTIME_IGNOREDOTFILES).
	IgnoreDotFiles bool
}

// LoadDir reads every file in dir and below (following links), in name
// order, and compiles them. Names starting with ".." are a ConfigMap
// volume's own (its timestamped copies and the ..data link) and are
// skipped: the files beside them are links into them.
func LoadDir(dir string, o LoadOptions) (*config.Config, error) {
	paths, err := Files(dir, o.IgnoreDotFiles)
	if err != nil {
		return nil, err
	}
	var files []*File
	var errs []error
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("load config: %w", err))
			continue
		}
		f, err := Parse(p, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, f)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return Compile(files, o.Options)
}

// Files are the paths LoadDir reads, sorted.
func Files(dir string, ignoreDotFiles bool) ([]string, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("load config: %s is not a folder", dir)
	}
	var out []string
	var walk func(string) error
	walk = func(at string) error {
		entries, err := os.ReadDir(at)
		if err != nil {
			return fmt.Errorf("load config: %w", err)
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, "..") || (ignoreDotFiles && strings.HasPrefix(name, ".")) {
				continue
			}
			p := filepath.Join(at, name)
			st, err := os.Stat(p) // follows links
			if errors.Is(err, fs.ErrNotExist) {
				continue // a dangling link: a file being replaced
			}
			if err != nil {
				return fmt.Errorf("load config: %w", err)
			}
			if st.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
			} else if st.Mode().IsRegular() {
				out = append(out, p)
			}
		}
		return nil
	}
	if err := walk(dir); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}
