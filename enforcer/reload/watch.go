package reload

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long a Watcher waits after the last change before
// reporting it: writers (the kubelet, editors, `kubectl cp`) touch a file
// several times in a burst.
const DefaultDebounce = 200 * time.Millisecond

// Watcher reports changes to a set of files. It watches their directories,
// not the files: a ConfigMap volume replaces its files by swapping the
// `..data` symlink, and editors often write a new file and rename it over
// the old one, either of which would end a watch on the file itself.
type Watcher struct {
	fs       *fsnotify.Watcher
	names    map[string]bool // cleaned absolute paths of the watched files
	dirs     map[string]bool // folders every entry of which is watched
	debounce time.Duration
}

// AddDir watches every entry of dir: a file added, changed or removed
// there is a change (a folder of configuration files).
func (w *Watcher) AddDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("watch config %s: %w", dir, err)
	}
	if err := w.fs.Add(abs); err != nil {
		return fmt.Errorf("watch config directory %s: %w", abs, err)
	}
	w.dirs[abs] = true
	return nil
}

// NewWatcher watches the directories of paths. Close it, or let Run end.
func NewWatcher(paths []string, debounce time.Duration) (*Watcher, error) {
	fs, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	w := &Watcher{fs: fs, names: map[string]bool{}, dirs: map[string]bool{}, debounce: debounce}
	dirs := map[string]bool{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			_ = fs.Close()
			return nil, fmt.Errorf("watch config %s: %w", p, err)
		}
		w.names[abs] = true
		dirs[filepath.Dir(abs)] = true
	}
	for dir := range dirs {
		if err := fs.Add(dir); err != nil {
			_ = fs.Close()
			return nil, fmt.Errorf("watch config directory %s: %w", dir, err)
		}
	}
	return w, nil
}

// relevant reports whether an event in a watched directory may change one of
// the files: the file itself, or a ConfigMap volume's `..data` symlink and
// timestamped directories, which the file is a link through.
func (w *Watcher) relevant(name string) bool {
	clean := filepath.Clean(name)
	return w.names[clean] || w.dirs[filepath.Dir(clean)] || strings.HasPrefix(filepath.Base(name), "..")
}

// Run calls onChange once per burst of relevant events, debounced, until ctx
// ends; it then closes the watcher. onErr receives the watcher's own errors
// (for example an overflowing event queue, after which onChange is called
// anyway since a change may have been missed).
func (w *Watcher) Run(ctx context.Context, onChange func(), onErr func(error)) {
	defer func() { _ = w.fs.Close() }()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if w.relevant(ev.Name) {
				timer.Reset(w.debounce)
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			onErr(fmt.Errorf("watch config: %w", err))
			timer.Reset(w.debounce)
		case <-timer.C:
			onChange()
		}
	}
}
