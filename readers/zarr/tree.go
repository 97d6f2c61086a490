package zarr

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Node is a group or an array in a hierarchy.
type Node struct {
	Path    string // "" for the root
	IsArray bool
	Attrs   map[string]json.RawMessage
	// Children are the direct children, sorted by path.
	Children []*Node
	// Err is set for an array whose metadata this package cannot read (an
	// unsupported data type, say); OpenArray returns it. The rest of the hierarchy
	// is still usable.
	Err  error
	meta *arrayMeta
}

// Name is the last path segment ("" for the root).
func (n *Node) Name() string {
	if i := strings.LastIndexByte(n.Path, '/'); i >= 0 {
		return n.Path[i+1:]
	}
	return n.Path
}

// Hierarchy is an opened store: the tree of its groups and arrays.
type Hierarchy struct {
	Store        Store
	ZarrFormat   int
	Consolidated bool // the tree came from consolidated metadata
	Root         *Node
	nodes        map[string]*Node
}

// OpenDir opens the Zarr directory at path.
func OpenDir(path string) (*Hierarchy, error) {
	s, err := NewDirStore(path)
	if err != nil {
		return nil, err
	}
	return Open(s)
}

// OpenPath opens a Zarr directory, or a zip archive (a regular file, e.g.
// "x.zarr.zip"). The archive stays open for the Hierarchy's lifetime. (OpenNodePath
// also takes a path to a node inside a store.)
func OpenPath(path string) (*Hierarchy, error) {
	s, err := openRoot(path)
	if err != nil {
		return nil, err
	}
	h, err := Open(s)
	if err != nil {
		closeStore(s)
		return nil, err
	}
	return h, nil
}

// Open reads the hierarchy of store: from consolidated metadata (v2 .zmetadata, or
// consolidated_metadata in the v3 root zarr.json) when present, otherwise by listing
// the store (which must then implement Lister). The root may be an array.
func Open(store Store) (*Hierarchy, error) {
	h := &Hierarchy{Store: store, nodes: map[string]*Node{}}
	fail := func(key string, err error) (*Hierarchy, error) {
		return nil, &Error{Store: store.String(), Key: key, Err: err}
	}
	// v3 first.
	doc, err := store.Get("zarr.json")
	switch {
	case err == nil:
		h.ZarrFormat = 3
		z, err := parseZarrJSON(doc)
		if err != nil {
			return fail("zarr.json", err)
		}
		if z.NodeType == "array" {
			m, err := v3ArrayMeta(z)
			if err != nil {
				return fail("zarr.json", err)
			}
			h.add("", &Node{IsArray: true, Attrs: m.attrs, meta: m})
			return h.finish()
		}
		h.add("", &Node{Attrs: z.Attributes})
		if !isJSONNull(z.ConsolidatedMetadata) {
			if err := h.readV3Consolidated(z.ConsolidatedMetadata); err != nil {
				return fail("zarr.json", err)
			}
			h.Consolidated = true
			return h.finish()
		}
		if err := h.listV3(); err != nil {
			return nil, err
		}
		return h.finish()
	case !errors.Is(err, ErrNotFound):
		return fail("zarr.json", err)
	}
	h.ZarrFormat = 2
	if doc, err := store.Get(".zmetadata"); err == nil {
		if err := h.readV2Consolidated(doc); err != nil {
			return fail(".zmetadata", err)
		}
		h.Consolidated = true
		return h.finish()
	} else if !errors.Is(err, ErrNotFound) {
		return fail(".zmetadata", err)
	}
	if err := h.listV2(); err != nil {
		return nil, err
	}
	return h.finish()
}

func (h *Hierarchy) add(path string, n *Node) {
	n.Path = path
	h.nodes[path] = n
}

// addBroken records an array whose metadata does not parse. (A v3 node whose
// zarr.json does not parse may be a group; finish lets it keep its children.)
func (h *Hierarchy) addBroken(p string, attrs []byte, err error) {
	a, aerr := parseAttrs(attrs)
	if aerr != nil {
		a = map[string]json.RawMessage{}
	}
	h.add(p, &Node{IsArray: true, Attrs: a, Err: err})
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// finish links nodes to parents, creating implicit groups where needed.
func (h *Hierarchy) finish() (*Hierarchy, error) {
	if _, ok := h.nodes[""]; !ok {
		h.add("", &Node{Attrs: map[string]json.RawMessage{}})
	}
	paths := make([]string, 0, len(h.nodes))
	for p := range h.nodes {
		paths = append(paths, p)
	}
	for _, p := range paths {
		for q := p; q != ""; {
			q = parentOf(q)
			if _, ok := h.nodes[q]; !ok {
				h.add(q, &Node{Attrs: map[string]json.RawMessage{}})
			}
		}
	}
	for p, n := range h.nodes {
		if p == "" {
			continue
		}
		parent := h.nodes[parentOf(p)]
		if parent.IsArray && parent.Err == nil {
			return nil, &Error{Store: h.Store.String(), Path: p, Err: fmt.Errorf("node inside array %q", parent.Path)}
		}
		parent.Children = append(parent.Children, n)
	}
	for _, n := range h.nodes {
		sort.Slice(n.Children, func(i, j int) bool { return n.Children[i].Path < n.Children[j].Path })
	}
	h.Root = h.nodes[""]
	return h, nil
}

func (h *Hierarchy) readV2Consolidated(doc []byte) error {
	var c struct {
		Format   int                        `json:"zarr_consolidated_format"`
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if err := decodeJSON(doc, &c); err != nil {
		return fmt.Errorf("malformed .zmetadata: %w", err)
	}
	if c.Format != 1 {
		return fmt.Errorf(".zmetadata: zarr_consolidated_format %d, want 1", c.Format)
	}
	for key, v := range c.Metadata {
		switch {
		case key == ".zarray" || strings.HasSuffix(key, "/.zarray"):
			p := strings.TrimSuffix(strings.TrimSuffix(key, ".zarray"), "/")
			m, err := parseZarray(v, c.Metadata[join(p, ".zattrs")])
			if err != nil {
				h.addBroken(p, c.Metadata[join(p, ".zattrs")], err)
				continue
			}
			h.add(p, &Node{IsArray: true, Attrs: m.attrs, meta: m})
		case key == ".zgroup" || strings.HasSuffix(key, "/.zgroup"):
			p := strings.TrimSuffix(strings.TrimSuffix(key, ".zgroup"), "/")
			attrs, err := parseAttrs(c.Metadata[join(p, ".zattrs")])
			if err != nil {
				return fmt.Errorf("group %q: %w", p, err)
			}
			h.add(p, &Node{Attrs: attrs})
		}
	}
	return nil
}

func (h *Hierarchy) readV3Consolidated(raw json.RawMessage) error {
	var c struct {
		Kind     string                     `json:"kind"`
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("consolidated_metadata: %w", err)
	}
	if c.Kind != "" && c.Kind != "inline" {
		return fmt.Errorf("consolidated_metadata kind %q: %w", c.Kind, ErrUnsupported)
	}
	for p, doc := range c.Metadata {
		z, err := parseZarrJSON(doc)
		if err != nil {
			return fmt.Errorf("node %q: %w", p, err)
		}
		p = strings.Trim(p, "/")
		h.addV3(p, z)
	}
	return nil
}

// listAll lists the keys that may be metadata: the store's own metadata walk when it
// has one (DirStore skips chunk directories), else every key.
func (h *Hierarchy) listAll() ([]string, error) {
	if m, ok := h.Store.(interface{ metadataKeys() ([]string, error) }); ok {
		keys, err := m.metadataKeys()
		if err != nil {
			return nil, &Error{Store: h.Store.String(), Err: err}
		}
		return keys, nil
	}
	l, err := h.lister()
	if err != nil {
		return nil, err
	}
	keys, err := l.List("")
	if err != nil {
		return nil, &Error{Store: h.Store.String(), Err: err}
	}
	return keys, nil
}

func (h *Hierarchy) lister() (Lister, error) {
	l, ok := h.Store.(Lister)
	if !ok {
		return nil, &Error{Store: h.Store.String(), Err: fmt.Errorf("no consolidated metadata and the store cannot list keys: %w", ErrUnsupported)}
	}
	return l, nil
}

func (h *Hierarchy) listV3() error {
	keys, err := h.listAll()
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k == "zarr.json" || !strings.HasSuffix(k, "/zarr.json") {
			continue
		}
		p := strings.TrimSuffix(k, "/zarr.json")
		doc, err := h.Store.Get(k)
		if err != nil {
			return &Error{Store: h.Store.String(), Key: k, Err: err}
		}
		z, err := parseZarrJSON(doc)
		if err != nil {
			// As for v2: the error stays on this node, the rest stays usable.
			h.addBroken(p, nil, fmt.Errorf("%s: %w", k, err))
			continue
		}
		h.addV3(p, z)
	}
	return nil
}

func (h *Hierarchy) listV2() error {
	keys, err := h.listAll()
	if err != nil {
		return err
	}
	for _, k := range keys {
		var p string
		switch {
		case k == ".zarray" || strings.HasSuffix(k, "/.zarray"):
			p = strings.TrimSuffix(strings.TrimSuffix(k, ".zarray"), "/")
			doc, err := h.Store.Get(k)
			if err != nil {
				return &Error{Store: h.Store.String(), Key: k, Err: err}
			}
			attrs, err := h.Store.Get(join(p, ".zattrs"))
			if err != nil && !errors.Is(err, ErrNotFound) {
				return &Error{Store: h.Store.String(), Key: join(p, ".zattrs"), Err: err}
			}
			m, err := parseZarray(doc, attrs)
			if err != nil {
				h.addBroken(p, attrs, err)
				continue
			}
			h.add(p, &Node{IsArray: true, Attrs: m.attrs, meta: m})
		case k == ".zgroup" || strings.HasSuffix(k, "/.zgroup"):
			p = strings.TrimSuffix(strings.TrimSuffix(k, ".zgroup"), "/")
			attrs, err := h.Store.Get(join(p, ".zattrs"))
			if err != nil && !errors.Is(err, ErrNotFound) {
				return &Error{Store: h.Store.String(), Key: join(p, ".zattrs"), Err: err}
			}
			a, err := parseAttrs(attrs)
			if err != nil {
				return &Error{Store: h.Store.String(), Key: join(p, ".zattrs"), Err: err}
			}
			h.add(p, &Node{Attrs: a})
		}
	}
	if len(h.nodes) == 0 {
		return &Error{Store: h.Store.String(), Err: fmt.Errorf("no Zarr metadata found (.zgroup, .zarray, zarr.json): %w", ErrNotFound)}
	}
	return nil
}

// Node returns the node at path (nil if there is none).
func (h *Hierarchy) Node(path string) *Node { return h.nodes[strings.Trim(path, "/")] }

// Arrays returns the paths of all arrays, sorted.
func (h *Hierarchy) Arrays() []string {
	var out []string
	for p, n := range h.nodes {
		if n.IsArray {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// OpenArray opens the array at path using the hierarchy's metadata (no store read).
func (h *Hierarchy) OpenArray(path string) (*Array, error) {
	path = strings.Trim(path, "/")
	n, ok := h.nodes[path]
	if !ok {
		return nil, &Error{Store: h.Store.String(), Path: path, Err: fmt.Errorf("no such array: %w", ErrNotFound)}
	}
	if !n.IsArray {
		return nil, &Error{Store: h.Store.String(), Path: path, Err: fmt.Errorf("a group, not an array")}
	}
	if n.Err != nil {
		return nil, &Error{Store: h.Store.String(), Path: path, Err: n.Err}
	}
	return newArray(h.Store, path, n.meta)
}

// addV3 adds the node of a parsed v3 zarr.json at path p; an array whose metadata is invalid
// keeps its error on the node, and the rest of the tree stays usable.
func (h *Hierarchy) addV3(p string, z *zarrJSON) {
	if z.NodeType != "array" {
		h.add(p, &Node{Attrs: z.Attributes})
		return
	}
	m, err := v3ArrayMeta(z)
	if err != nil {
		h.add(p, &Node{IsArray: true, Attrs: z.Attributes, Err: err})
		return
	}
	h.add(p, &Node{IsArray: true, Attrs: m.attrs, meta: m})
}
