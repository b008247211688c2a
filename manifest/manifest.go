package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Objects is what a set of files holds, in load order.
type Objects struct {
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Nodes          []*corev1.Node
	// sources maps each object to its "file:line".
	sources map[any]string
}

// Source returns where obj, one of o's objects, was read: "file:line" of
// its document, or "" when unknown.
func (o *Objects) Source(obj any) string { return o.sources[obj] }

// Merge appends o2's objects to o (for multiple --objects). It does not
// de-duplicate; pass all paths to one LoadPaths call for that. A nil o2 is a
// no-op.
func (o *Objects) Merge(o2 *Objects) {
	if o2 == nil {
		return
	}
	o.Services = append(o.Services, o2.Services...)
	o.EndpointSlices = append(o.EndpointSlices, o2.EndpointSlices...)
	o.Nodes = append(o.Nodes, o2.Nodes...)
	if o.sources == nil {
		o.sources = map[any]string{}
	}
	for k, v := range o2.sources {
		o.sources[k] = v
	}
}

// Warning is a problem with one object that caused it to be skipped; loading
// goes on.
type Warning struct {
	Source  string // "path/file.yaml:12": where the object's document starts, or a List item's own line
	Object  string // "Service default/web", "EndpointSlice default/web-abc", "Node node-a"; "" if unknown
	Message string
}

// String formats the warning as "SOURCE: OBJECT: MESSAGE", omitting OBJECT
// when it is unknown.
func (w Warning) String() string {
	if w.Object == "" {
		return w.Source + ": " + w.Message
	}
	return w.Source + ": " + w.Object + ": " + w.Message
}

// ParseError is a fatal problem with a file: unreadable, or not valid
// YAML/JSON. Line is 1-based; 0 means unknown or none (the file cannot be
// read).
type ParseError struct {
	File string
	Line int
	Msg  string
}

// Error returns "FILE: LINE: MSG", or "FILE: MSG" without a line.
func (e *ParseError) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return e.File + ": " + strconv.Itoa(e.Line) + ": " + e.Msg
}

// fileError is the ParseError of a file that cannot be read: the file
// named once ("x.yaml: no such file or directory", not "x.yaml: open
// x.yaml: ...").
func fileError(p string, err error) *ParseError {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == p {
		return &ParseError{File: p, Msg: pe.Err.Error()}
	}
	return fileError(p, err)
}

// LoadPaths reads each path: a file, or a directory whose *.yaml, *.yml and
// *.json files (non-recursive, sorted by name) are read. An object seen again
// in a later file replaces the earlier one. It returns the first *ParseError
// and stops; otherwise the objects and warnings for skipped objects.
func LoadPaths(paths []string) (*Objects, []Warning, error) {
	l := newLoader()
	for _, p := range paths {
		if err := l.loadPath(p); err != nil {
			return nil, nil, err
		}
	}
	return l.result(), l.warnings, nil
}

// Load decodes one file's bytes; name is used in messages and decides the
// format (a name ending in ".json" is read as JSON, anything else as YAML
// documents that may themselves be JSON).
func Load(name string, data []byte) (*Objects, []Warning, error) {
	l := newLoader()
	if err := l.loadFile(name, data); err != nil {
		return nil, nil, err
	}
	return l.result(), l.warnings, nil
}

// fileExts are the extensions read from a directory.
var fileExts = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// loadPath loads a file, or the matching files of a directory.
func (l *loader) loadPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fileError(p, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fileError(p, err)
	}
	if !info.IsDir() {
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return fileError(p, err)
		}
		return l.loadFile(p, data)
	}
	f.Close()
	entries, err := os.ReadDir(p) // sorted by file name
	if err != nil {
		return fileError(p, err)
	}
	read := 0
	defer func() {
		if read == 0 {
			l.warn(p, "", fmt.Sprintf("no *.yaml, *.yml or *.json file in this directory (%d other entries); nothing read", len(entries)))
		}
	}()
	for _, e := range entries {
		if e.IsDir() || !fileExts[filepath.Ext(e.Name())] {
			continue
		}
		name := filepath.Join(p, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			// Follow symlinks to files; skip links to directories and
			// other non-regular files. A dangling link fails below.
			if st, err := os.Stat(name); err == nil && !st.Mode().IsRegular() {
				continue
			}
		} else if !e.Type().IsRegular() {
			continue // fifo, socket, device: never block on them
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return fileError(name, err)
		}
		read++
		if err := l.loadFile(name, data); err != nil {
			return err
		}
	}
	return nil
}
