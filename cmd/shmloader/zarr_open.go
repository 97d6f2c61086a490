package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gobatch/gobatch/readers/zarr"
)

// zarrMetaFiles are the documents whose presence makes a directory a Zarr node.
var zarrMetaFiles = []string{"zarr.json", ".zgroup", ".zarray", ".zmetadata"}

// isZarrDir reports whether dir holds Zarr metadata.
func isZarrDir(dir string) bool {
	for _, m := range zarrMetaFiles {
		if st, err := os.Stat(filepath.Join(dir, m)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// locateStore splits a path such as /data/sat.zarr/group/data into the store root
// (the outermost directory on the path that holds Zarr metadata, /data/sat.zarr, or a
// zip archive such as /data/2021.zarr.zip) and the node path inside it (group/data).
// Nodes below the root need no metadata of their own (consolidated metadata, implicit
// groups).
func locateStore(p string) (root, node string, err error) {
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
			rel := strings.Join(parts[i+1:], "/")
			// Report the store as the user spelled it where possible.
			display := cur
			if !filepath.IsAbs(clean) {
				if r, err := filepath.Rel(mustGetwd(), cur); err == nil {
					display = r
				}
			}
			return display, rel, nil
		}
	}
	if _, err := os.Stat(clean); err != nil {
		return "", "", fmt.Errorf("%s: %w", p, err)
	}
	return "", "", fmt.Errorf("%s: not a Zarr store: no Zarr metadata (%s) in it or in a directory above it",
		p, strings.Join(zarrMetaFiles, ", "))
}

func mustGetwd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	return wd
}

// openArrayPath opens the array named by a STORE/ARRAY path. It reads the array's own
// metadata when it has some and otherwise the store's hierarchy (consolidated
// metadata), which also gives the clearest error for a group or a missing node.
func openArrayPath(p string) (*zarr.Array, error) {
	root, node, err := locateStore(p)
	if err != nil {
		return nil, err
	}
	store, err := openStore(root)
	if err != nil {
		return nil, err
	}
	a, err := zarr.OpenArray(store, node)
	if err == nil || !errors.Is(err, zarr.ErrNotFound) {
		return a, err
	}
	h, herr := zarr.Open(store)
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

// openHierarchyPath opens the store a path points into and returns the node path.
func openHierarchyPath(p string) (*zarr.Hierarchy, string, error) {
	root, node, err := locateStore(p)
	if err != nil {
		return nil, "", err
	}
	store, err := openStore(root)
	if err != nil {
		return nil, "", err
	}
	h, err := zarr.Open(store)
	if err != nil {
		return nil, "", err
	}
	if node != "" && h.Node(node) == nil {
		return nil, "", fmt.Errorf("store %s: no node %q", root, node)
	}
	return h, node, nil
}

// openStore opens a store root found by locateStore: a directory or a zip archive. The
// store lives as long as the command (the process exit closes a zip archive).
func openStore(root string) (zarr.Store, error) {
	if st, err := os.Stat(root); err == nil && st.Mode().IsRegular() {
		return zarr.OpenZipStore(root)
	}
	return zarr.NewDirStore(root)
}

func briefList(items []string, n int) string {
	if len(items) == 0 {
		return "none"
	}
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", ... (%d more)", len(items)-n)
}
