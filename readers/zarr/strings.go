package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// ReadStrings reads the whole array as strings, C order: variable-length strings
// (v2 object dtype with vlen-utf8, v3 string), fixed-length unicode (<U), and byte
// strings as their raw bytes (|S with trailing NULs dropped, as numpy does; v2
// vlen-bytes and v3 variable_length_bytes). Missing chunks read as the fill value.
func (a *Array) ReadStrings() ([]string, error) {
	return a.ReadBoxStrings(a.fullBox(), a.Shape)
}

// ReadBoxStrings reads the box [start, stop) of a string array (the types of
// ReadStrings) as strings, C order. Only the chunks the box touches are read.
func (a *Array) ReadBoxStrings(start, stop []int) ([]string, error) {
	switch a.DType.Kind {
	case KindString, KindVarBytes, KindUTF32, KindBytes:
	default:
		return nil, a.fail(fmt.Errorf("ReadStrings on a %s array", a.DType))
	}
	total, err := a.boxLen(start, stop)
	if err != nil {
		return nil, err
	}
	out := make([]string, total)
	if total == 0 {
		return out, nil
	}
	// The box walk of ReadBox, with strings for elements: each chunk's strings are
	// copied into its part of the box.
	chunk := make([]string, prod(a.Chunks))
	r := boxRead{a: a, start: start, stop: stop, dst: stringBytes(out), conv: converter{fn: convStrings},
		os: stringSize, es: stringSize}
	var raw []byte
	nd := len(a.Shape)
	lo, hi, _ := a.chunkRange(start, stop)
	idx := lo
	for {
		if err := a.chunkStrings(idx[:nd], chunk, &raw); err != nil {
			return nil, err
		}
		r.copyOut(idx[:nd], stringBytes(chunk))
		if !nextIndex(idx[:nd], lo[:nd], hi[:nd]) {
			return out, nil
		}
	}
}

const stringSize = int(unsafe.Sizeof(""))

// stringBytes views s as bytes for the box walk, which moves elements through
// unsafe.Pointer; convStrings copies them back as strings, so that the garbage
// collector sees every string written.
func stringBytes(s []string) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*stringSize)
}

func convStrings(_ convArgs, dst, src unsafe.Pointer, n int) {
	copy(unsafe.Slice((*string)(dst), n), unsafe.Slice((*string)(src), n))
}

func (a *Array) chunkStrings(idx []int, out []string, raw *[]byte) error {
	if !a.DType.variable() {
		n := a.ChunkBytes()
		if cap(*raw) < n {
			*raw = make([]byte, n)
		}
		b := (*raw)[:n]
		if err := a.decodeChunk(idx, b); err != nil {
			return err
		}
		es := a.DType.Size
		for k := range out {
			e := b[k*es : (k+1)*es]
			if a.DType.Kind == KindUTF32 {
				out[k] = utf32String(e)
			} else {
				out[k] = string(bytes.TrimRight(e, "\x00"))
			}
		}
		return nil
	}
	key := a.ChunkKeyOf(idx)
	src, err := storeGet(a.Store, key, -1, nil)
	if err != nil && errors.Is(err, ErrNotFound) && a.keys.probeSlash && len(idx) > 1 {
		key = string(a.appendKey(nil, idx, '/'))
		src, err = storeGet(a.Store, key, -1, nil)
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			for k := range out {
				out[k] = a.FillString
			}
			return nil
		}
		return withContext(a.Store.String(), a.Path, key, err)
	}
	b := src
	for i := len(a.pipe.b2b) - 1; i >= 0; i-- {
		b, err = a.pipe.b2b[i].decode(nil, b, -1)
		if err != nil {
			return withContext(a.Store.String(), a.Path, key, wrapCodec(a.pipe.b2b[i].name(), err))
		}
	}
	name := "vlen-utf8"
	if a.DType.Kind == KindVarBytes {
		name = "vlen-bytes"
	}
	if err := decodeVlen(b, out, a.DType.Kind == KindString); err != nil {
		return withContext(a.Store.String(), a.Path, key, wrapCodec(name, err))
	}
	if a.Order == 'F' && len(a.Chunks) > 1 {
		// The items are stored in Fortran order: reorder to C.
		f := append([]string(nil), out...)
		fstr := make([]int, len(a.Chunks))
		acc := 1
		for d := range a.Chunks {
			fstr[d] = acc
			acc *= a.Chunks[d]
		}
		cstr := cStrides(a.Chunks)
		for k := range out {
			o := 0
			for d := range a.Chunks {
				o += (k / cstr[d]) % a.Chunks[d] * fstr[d]
			}
			out[k] = f[o]
		}
	}
	return nil
}

// decodeVlen parses the numcodecs/zarr vlen-utf8 and vlen-bytes layout: uint32 LE
// item count, then per item a uint32 LE byte length and the bytes (UTF-8 when utf8).
func decodeVlen(b []byte, out []string, utf8Only bool) error {
	if len(b) < 4 {
		return corruptf("%d bytes, shorter than the item count", len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) != uint64(len(out)) {
		return corruptf("holds %d items, the chunk has %d", n, len(out))
	}
	p := 4
	for i := range out {
		if len(b)-p < 4 {
			return corruptf("item %d: truncated length", i)
		}
		l := binary.LittleEndian.Uint32(b[p:])
		p += 4
		if uint64(l) > uint64(len(b)-p) {
			return corruptf("item %d: length %d past the end", i, l)
		}
		s := b[p : p+int(l)]
		if utf8Only && !utf8.Valid(s) {
			return corruptf("item %d: invalid UTF-8", i)
		}
		out[i] = string(s)
		p += int(l)
	}
	if p != len(b) {
		return corruptf("%d trailing bytes", len(b)-p)
	}
	return nil
}

func utf32String(e []byte) string {
	var sb strings.Builder
	for i := 0; i+4 <= len(e); i += 4 {
		r := rune(binary.LittleEndian.Uint32(e[i:]))
		if r == 0 {
			// numpy drops trailing NULs; an embedded NUL ends the string too.
			break
		}
		if !utf8.ValidRune(r) {
			r = utf8.RuneError
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
