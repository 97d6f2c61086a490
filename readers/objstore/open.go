package objstore

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/gobatch/gobatch/readers/zarr"
)

// The one rule that maps a store path to a store: a URL with a scheme of schemes is remote,
// anything else a local path for readers/zarr.

// schemes are the URL schemes of remote stores.
var schemes = []string{"s3", "gs", "https", "http"}

// IsURL reports whether p names a remote store (s3://, gs://, https://, http://).
func IsURL(p string) bool {
	for _, s := range schemes {
		if strings.HasPrefix(p, s+"://") {
			return true
		}
	}
	return false
}

// Join resolves store path p against root (a directory or a URL, "" for none): p itself
// when it is a URL or an absolute path, else p under root.
func Join(root, p string) string {
	switch {
	case IsURL(p), root == "", !IsURL(root) && filepath.IsAbs(p):
		return p
	case IsURL(root):
		return strings.TrimSuffix(root, "/") + "/" + strings.TrimPrefix(filepath.ToSlash(p), "./")
	}
	return filepath.Join(root, p)
}

// OpenStore opens the store whose root is p: a URL (the whole URL is the root), with the
// remote stores' options opt, or a local directory or zip archive. Close it with
// zarr.CloseStore.
func OpenStore(p string, opt Options) (zarr.Store, error) {
	if IsURL(p) {
		return openURL(p, opt)
	}
	return zarr.OpenStore(p)
}

// SplitPath splits p into its store root and the node path inside it: for a URL, at the
// first segment ending in ".zarr" (the whole URL when none does); for a local path as
// zarr.SplitPath does.
func SplitPath(p string) (root, node string, err error) {
	if !IsURL(p) {
		return zarr.SplitPath(p)
	}
	u, err := url.Parse(p)
	if err != nil {
		return "", "", fmt.Errorf("store %s: %w", Redact(p), redactErr(err))
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i, s := range segs {
		if strings.HasSuffix(strings.ToLower(s), ".zarr") {
			u.Path = "/" + strings.Join(segs[:i+1], "/")
			return u.String(), strings.Join(segs[i+1:], "/"), nil
		}
	}
	return strings.TrimSuffix(p, "/"), "", nil
}

// openURL opens the remote store rooted at URL p.
func openURL(p string, opt Options) (zarr.Store, error) {
	u, err := url.Parse(p)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", Redact(p), redactErr(err))
	}
	switch u.Scheme {
	case "s3", "gs":
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("open store %s: a query or fragment in an %s:// URL is not supported", Redact(p), u.Scheme)
		}
		return NewS3Store(u.Scheme, u.Host, u.Path, opt)
	}
	return NewHTTPStore(p, opt)
}

// OpenPath opens the hierarchy of the store whose root is p (a URL, a directory or a zip
// archive), as zarr.OpenPath does for local paths.
func OpenPath(p string) (*zarr.Hierarchy, error) {
	if !IsURL(p) {
		return zarr.OpenPath(p)
	}
	s, err := OpenStore(p, Options{})
	if err != nil {
		return nil, err
	}
	return zarr.Open(s)
}

// OpenNodePath opens the store p points into (SplitPath) and returns its hierarchy and the
// node p names in it, as zarr.OpenNodePath does for local paths.
func OpenNodePath(p string) (*zarr.Hierarchy, string, error) {
	if !IsURL(p) {
		return zarr.OpenNodePath(p)
	}
	root, node, err := SplitPath(p)
	if err != nil {
		return nil, "", err
	}
	s, err := OpenStore(root, Options{})
	if err != nil {
		return nil, "", err
	}
	h, err := zarr.OpenNodeIn(s, root, node)
	return h, node, err
}

// OpenArrayPath opens the array p (STORE/ARRAY, SplitPath) names, as zarr.OpenArrayPath does
// for local paths.
func OpenArrayPath(p string) (*zarr.Array, error) {
	if !IsURL(p) {
		return zarr.OpenArrayPath(p)
	}
	root, node, err := SplitPath(p)
	if err != nil {
		return nil, err
	}
	s, err := OpenStore(root, Options{})
	if err != nil {
		return nil, err
	}
	return zarr.OpenArrayIn(s, root, node)
}
