package zarr

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// This file turns the paths users type into stores, hierarchies and arrays: a store
// directory, a zip archive, or a node inside either (sat.zarr/group/data).

// metaFiles are the documents whose presence makes a directory a Zarr node.
var metaFiles = []string{"zarr.json", ".zgroup", ".zarray", ".zmetadata"}

// isZarrDir reports whether dir holds Zarr metadata.
func isZarrDir(dir string) bool {
	for _, m := range metaFiles {
		if st, err := os.Stat(filepath.Join(dir, m)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// SplitPath splits a path such as /data/sat.zarr/group/data into the store root (the
// outermost directory on the path that holds Zarr metadata, /data/sat.zarr, or a zip
// archive such as /data/2021.zarr.zip) and the node path inside it (group/data).
// Nodes below the root need no metadata of their own (consolidated metadata, implicit
// groups), so the node may not exist: OpenNodePath and OpenArrayPath check. A
// relative path gives a root relative to the working directory.
func SplitPath(p string) (root, node string, err error) {
	clean := filepath.Clean(p)
	abs := clean
	if !filepath.IsAbs(abs) {
		if abs, err = filepath.Abs(clean); err != nil {
			return "", "", fmt.Errorf("%s: %w", p, err)
		}
	}
	// Walk down from the file-system root, one component at a time.
	vol := filepath.VolumeName(abs)
	parts := strings.Split(strings.TrimPrefix(abs[len(vol):], string(filepath.Separator)), string(filepath.Separator))
	cur := vol + string(filepath.Separator)
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		st, err := os.Stat(cur)
		if err != nil {
			break
		}
		isZip := st.Mode().IsRegular() && strings.HasSuffix(strings.ToLower(part), ".zip")
		if !isZip && !st.IsDir() {
			break
		}
		if isZip || isZarrDir(cur) {
			return displayPath(clean, cur), strings.Join(parts[i+1:], "/"), nil
		}
	}
	if _, err := os.Stat(clean); err != nil {
		return "", "", fmt.Errorf("%s: %w", p, err)
	}
	return "", "", fmt.Errorf("%s: not a Zarr store: no Zarr metadata (%s) in it or in a directory above it",
		p, strings.Join(metaFiles, ", "))
}

// displayPath is the store root abs as the user spelled the path: relative to the
// working directory when the path given was relative.
func displayPath(given, abs string) string {
	if filepath.IsAbs(given) {
		return abs
	}
	wd, err := os.Getwd()
	if err != nil {
		return abs
	}
	if r, err := filepath.Rel(wd, abs); err == nil {
		return r
	}
	return abs
}

// OpenStore opens the local store at root: a directory, or a zip archive (a regular file),
// which the caller closes (CloseStore) when done.
func OpenStore(root string) (Store, error) { return openRoot(root) }

// CloseStore closes a store that holds a resource (a zip archive's file); others are left.
func CloseStore(s Store) { closeStore(s) }

// openRoot opens the store at root: a directory, or a zip archive (a regular file).
func openRoot(root string) (Store, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("zarr: open %s: %w", root, err)
	}
	if st.IsDir() {
		return NewDirStore(root)
	}
	return OpenZipStore(root)
}

// closeStore closes a store that holds a resource (a zip archive's file).
func closeStore(s Store) {
	if c, ok := s.(io.Closer); ok {
		c.Close()
	}
}

// OpenNodePath opens the store that the path p points into (see SplitPath) and
// returns its hierarchy and the path of the node p names inside it ("" for the
// store's root), which must exist. A zip archive stays open for the Hierarchy's
// lifetime.
func OpenNodePath(p string) (*Hierarchy, string, error) {
	root, node, err := SplitPath(p)
	if err != nil {
		return nil, "", err
	}
	store, err := openRoot(root)
	if err != nil {
		return nil, "", err
	}
	h, err := OpenNodeIn(store, root, node)
	if err != nil {
		closeStore(store)
		return nil, "", err
	}
	return h, node, nil
}

// OpenNodeIn opens the hierarchy of store (named root in messages), in which node ("" for
// the root) must exist. It is OpenNodePath for a store opened elsewhere (readers/objstore).
func OpenNodeIn(store Store, root, node string) (*Hierarchy, error) {
	h, err := Open(store)
	if err != nil {
		return nil, err
	}
	if node != "" && h.Node(node) == nil {
		return nil, fmt.Errorf("store %s: no node %q", root, node)
	}
	return h, nil
}

// OpenArrayPath opens the array that the path p (STORE/ARRAY, see SplitPath) names.
// It reads the array's own metadata when it has some and otherwise the store's
// hierarchy (consolidated metadata), which also gives the clearest error for a group
// or a missing node, naming the arrays there are. A zip archive stays open for the
// Array's lifetime.
func OpenArrayPath(p string) (*Array, error) {
	root, node, err := SplitPath(p)
	if err != nil {
		return nil, err
	}
	store, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	a, err := OpenArrayIn(store, root, node)
	if err != nil {
		closeStore(store)
	}
	return a, err
}

// OpenArrayIn opens array node of store (named root in messages) as OpenArrayPath does: from
// the array's own metadata, else from the store's hierarchy, whose error names the arrays
// there are. It is OpenArrayPath for a store opened elsewhere (readers/objstore).
func OpenArrayIn(store Store, root, node string) (*Array, error) {
	a, err := OpenArray(store, node)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return a, err
	}
	h, herr := Open(store)
	if herr != nil {
		return nil, err // the array's own error says more than the hierarchy's
	}
	n := h.Node(node)
	switch {
	case n == nil:
		return nil, fmt.Errorf("store %s: no array %q (arrays: %s)", root, node, briefList(h.Arrays(), 8))
	case !n.IsArray:
		return nil, fmt.Errorf("store %s: %q is a group, not an array (arrays: %s)", root, node, briefList(h.Arrays(), 8))
	}
	return h.OpenArray(node)
}

// briefList joins the first n items, counting the rest.
func briefList(items []string, n int) string {
	if len(items) == 0 {
		return "none"
	}
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", ... (%d more)", len(items)-n)
}
