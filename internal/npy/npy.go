package npy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// magic starts every .npy file; the two bytes after it are the format version (1.0).
const magic = "\x93NUMPY\x01\x00"

// align is the alignment numpy gives the start of the data (magic, length and header
// dict together are a multiple of it).
const align = 64

// Header returns the complete .npy format 1.0 preamble (magic, version, header length
// and the padded header dict) for a C-order array of numpy type descr and shape.
func Header(descr string, shape []int) ([]byte, error) {
	if descr == "" || strings.ContainsAny(descr, "'\\\n") {
		return nil, fmt.Errorf("npy: bad descr %q", descr)
	}
	var sb strings.Builder
	sb.WriteString("{'descr': '")
	sb.WriteString(descr)
	sb.WriteString("', 'fortran_order': False, 'shape': (")
	for i, n := range shape {
		if n < 0 {
			return nil, fmt.Errorf("npy: negative dimension %d in shape %v", n, shape)
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(n))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString("), }")
	dict := sb.String()
	// Pad with spaces and end with a newline so that the data starts aligned.
	total := len(magic) + 2 + len(dict) + 1
	pad := (align - total%align) % align
	hlen := len(dict) + pad + 1
	if hlen > 0xffff {
		return nil, fmt.Errorf("npy: header of %d bytes does not fit format 1.0", hlen)
	}
	out := make([]byte, 0, total+pad)
	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint16(out, uint16(hlen))
	out = append(out, dict...)
	for range pad {
		out = append(out, ' ')
	}
	return append(out, '\n'), nil
}

// writeFile writes a .npy file at path holding data (C order, already in the byte order
// descr names). It writes a temporary file beside path and renames it into place, so a
// failed write leaves no partial file behind.
func writeFile(path, descr string, shape []int, data []byte) error {
	hdr, err := Header(descr, shape)
	if err != nil {
		return err
	}
	return writeAtomic(path, func(w io.Writer) error {
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		_, err := w.Write(data)
		return err
	})
}

// writeAtomic creates path through a temporary file in the same directory.
func writeAtomic(path string, fill func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the temporary name means nothing to the user
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = fill(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Write writes a .npy file of a C-order array of numpy type descr and shape, its bytes data
// (already in the byte order descr names), to path: "-" is stdout, an existing non-regular file
// (/dev/null, a pipe) is written in place, anything else atomically (a temporary file beside
// path renamed into place, so that a failed write leaves no partial file).
func Write(path, descr string, shape []int, data []byte) error {
	var f *os.File
	if path == "-" {
		f = os.Stdout
	} else if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return fmt.Errorf("write %s: is a directory", path)
		}
		if f, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		defer f.Close()
	} else {
		return writeFile(path, descr, shape, data)
	}
	hdr, err := Header(descr, shape)
	if err != nil {
		return err
	}
	if _, err := f.Write(hdr); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
