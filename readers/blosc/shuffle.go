package blosc

import "encoding/binary"

// Byte shuffle: a block of n = len/typesize elements is stored as typesize byte
// planes, plane j holding byte j of every element (shuffled[j*n+i] =
// element[i] byte j). The len%typesize trailing bytes are stored as they are.

// unshuffle writes the unshuffled block src into dst (same length, distinct).
func unshuffle(dst, src []byte, typesize int) {
	n := len(src) / typesize
	if typesize == 1 || n == 0 {
		copy(dst, src)
		return
	}
	switch typesize {
	case 2:
		unshuffle2(dst, src, n)
	case 4:
		unshuffle4(dst, src, n)
	case 8:
		unshuffle8(dst, src, n)
	default:
		unshuffleGeneric(dst, src, n, typesize)
	}
	copy(dst[n*typesize:], src[n*typesize:])
}

func unshuffleGeneric(dst, src []byte, n, typesize int) {
	for j := 0; j < typesize; j++ {
		plane := src[j*n : j*n+n]
		o := dst[j:]
		for i, b := range plane {
			o[i*typesize] = b
		}
	}
}

// spread8 moves the 4 bytes of x to the even bytes of the result.
func spread8(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000FFFF0000FFFF
	return (v | v<<8) & 0x00FF00FF00FF00FF
}

// The specialised loops walk the planes by re-slicing, which lets the compiler
// drop most bounds checks; the scalar tails handle the last n%16 (n%8) elements.
// On amd64, unshuffle2, unshuffle4 and unshuffle8 (shuffle_amd64.go) run SSE2 kernels and
// finish with these loops; elsewhere (shuffle_other.go) these loops do it all.

// unshuffle2Go interleaves the planes p0 and p1 (n bytes each) into dst.
func unshuffle2Go(dst, p0, p1 []byte, n int) {
	p0, p1 = p0[:n], p1[:n]
	o := dst[:2*n]
	for len(p0) >= 16 && len(p1) >= 16 && len(o) >= 32 {
		a0 := binary.LittleEndian.Uint64(p0)
		b0 := binary.LittleEndian.Uint64(p1)
		a1 := binary.LittleEndian.Uint64(p0[8:])
		b1 := binary.LittleEndian.Uint64(p1[8:])
		binary.LittleEndian.PutUint64(o, spread8(uint32(a0))|spread8(uint32(b0))<<8)
		binary.LittleEndian.PutUint64(o[8:], spread8(uint32(a0>>32))|spread8(uint32(b0>>32))<<8)
		binary.LittleEndian.PutUint64(o[16:], spread8(uint32(a1))|spread8(uint32(b1))<<8)
		binary.LittleEndian.PutUint64(o[24:], spread8(uint32(a1>>32))|spread8(uint32(b1>>32))<<8)
		p0, p1, o = p0[16:], p1[16:], o[32:]
	}
	for i := range p0 {
		o[2*i] = p0[i]
		o[2*i+1] = p1[i]
	}
}

// unshuffle4Go unshuffles elements from..n-1 of a typesize-4 block.
func unshuffle4Go(dst, src []byte, n, from int) {
	const m1, m2 = 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF
	p0, p1, p2, p3 := src[from:n], src[n+from:2*n], src[2*n+from:3*n], src[3*n+from:4*n]
	o := dst[4*from : 4*n]
	for len(p0) >= 8 && len(p1) >= 8 && len(p2) >= 8 && len(p3) >= 8 && len(o) >= 32 {
		// Rows a..d are the planes' next 8 bytes. Transposing each 32-bit half as
		// a 4x4 byte matrix leaves element k in the low half of row k and
		// element 4+k in its high half.
		a := binary.LittleEndian.Uint64(p0)
		b := binary.LittleEndian.Uint64(p1)
		c := binary.LittleEndian.Uint64(p2)
		d := binary.LittleEndian.Uint64(p3)
		t := (a>>8 ^ b) & m1
		b, a = b^t, a^t<<8
		t = (c>>8 ^ d) & m1
		d, c = d^t, c^t<<8
		t = (a>>16 ^ c) & m2
		c, a = c^t, a^t<<16
		t = (b>>16 ^ d) & m2
		d, b = d^t, b^t<<16
		binary.LittleEndian.PutUint64(o, a&0xFFFFFFFF|b<<32)
		binary.LittleEndian.PutUint64(o[8:], c&0xFFFFFFFF|d<<32)
		binary.LittleEndian.PutUint64(o[16:], a>>32|b&^0xFFFFFFFF)
		binary.LittleEndian.PutUint64(o[24:], c>>32|d&^0xFFFFFFFF)
		p0, p1, p2, p3, o = p0[8:], p1[8:], p2[8:], p3[8:], o[32:]
	}
	for i := range p0 {
		e := o[4*i : 4*i+4]
		e[0], e[1], e[2], e[3] = p0[i], p1[i], p2[i], p3[i]
	}
}

// transpose8x8 transposes the 8x8 byte matrix whose row r is the little-endian
// word x[r]: afterwards byte c of x[r] is what was byte r of x[c]. Three rounds
// swap 1-, 2- and 4-byte blocks between rows 1, 2 and 4 apart.
func transpose8x8(x *[8]uint64) {
	const m1, m2, m3 = 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF
	x0, x1, x2, x3, x4, x5, x6, x7 := x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
	t := (x0>>8 ^ x1) & m1
	x1, x0 = x1^t, x0^t<<8
	t = (x2>>8 ^ x3) & m1
	x3, x2 = x3^t, x2^t<<8
	t = (x4>>8 ^ x5) & m1
	x5, x4 = x5^t, x4^t<<8
	t = (x6>>8 ^ x7) & m1
	x7, x6 = x7^t, x6^t<<8

	t = (x0>>16 ^ x2) & m2
	x2, x0 = x2^t, x0^t<<16
	t = (x1>>16 ^ x3) & m2
	x3, x1 = x3^t, x1^t<<16
	t = (x4>>16 ^ x6) & m2
	x6, x4 = x6^t, x4^t<<16
	t = (x5>>16 ^ x7) & m2
	x7, x5 = x7^t, x5^t<<16

	t = (x0>>32 ^ x4) & m3
	x4, x0 = x4^t, x0^t<<32
	t = (x1>>32 ^ x5) & m3
	x5, x1 = x5^t, x1^t<<32
	t = (x2>>32 ^ x6) & m3
	x6, x2 = x6^t, x2^t<<32
	t = (x3>>32 ^ x7) & m3
	x7, x3 = x7^t, x3^t<<32
	x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7] = x0, x1, x2, x3, x4, x5, x6, x7
}

// unshuffle8Go unshuffles elements from..n-1 of a typesize-8 block.
func unshuffle8Go(dst, src []byte, n, from int) {
	var x [8]uint64
	i := from
	for ; i+8 <= n; i += 8 {
		for j := range x {
			x[j] = binary.LittleEndian.Uint64(src[j*n+i:])
		}
		transpose8x8(&x)
		o := dst[8*i : 8*i+64]
		for k := range x {
			binary.LittleEndian.PutUint64(o[8*k:], x[k])
		}
	}
	for ; i < n; i++ {
		for j := 0; j < 8; j++ {
			dst[8*i+j] = src[j*n+i]
		}
	}
}

// Bit shuffle (Kiyoshi Masui's bitshuffle, as Blosc applies it per block): the
// block's n elements (n a multiple of 8) are stored as 8*typesize bit rows of
// n/8 bytes. Row 8*j+k holds bit k of byte j of every element; element i is bit
// i%8 of byte i/8 of the row. Bytes after the shuffled elements are stored as
// they are. Blosc1 (format version 2) shuffles a block only when n%8 == 0 and
// stores it unchanged otherwise; Blosc2 shuffles the first n - n%8 elements.

// bitunshuffle writes the bit-unshuffled block src into dst. scratch (at least
// len(src) bytes, distinct from both) holds the byte planes in between.
func bitunshuffle(dst, src, scratch []byte, typesize int, blosc2 bool) {
	n := len(src) / typesize
	if n%8 != 0 {
		if !blosc2 {
			copy(dst, src)
			return
		}
		n -= n % 8
	}
	done := n * typesize
	if typesize == 1 {
		bitsToBytes(dst[:done], src[:done], n)
	} else {
		// Undo the bit transpose within each byte plane, then the byte shuffle.
		planes := scratch[:done]
		for j := 0; j < typesize; j++ {
			bitsToBytes(planes[j*n:(j+1)*n], src[j*n:(j+1)*n], n)
		}
		unshuffle(dst[:done], planes, typesize)
	}
	copy(dst[done:], src[done:])
}

// transposeBits8x8 transposes the 8x8 bit matrix whose row r is byte r of x and
// column c is bit c: afterwards bit c of byte r is what was bit r of byte c.
func transposeBits8x8(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00AA00AA00AA00AA
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000CCCC0000CCCC
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000F0F0F0F0
	x ^= t ^ t<<28
	return x
}

// bitsToBytes turns the 8 bit rows of one byte plane (rows[k*n/8+g] bit l is
// bit k of byte 8g+l) back into its n bytes (n%8 == 0).
func bitsToBytes(out, rows []byte, n int) {
	nb := n / 8
	g := 0
	var m [8]uint64
	for ; g+8 <= nb; g += 8 {
		// m[k] holds bytes g..g+7 of row k; after the byte transpose m[c] holds
		// byte g+c of every row, and its bit transpose is bytes 8(g+c)..+7.
		for k := range m {
			m[k] = binary.LittleEndian.Uint64(rows[k*nb+g:])
		}
		transpose8x8(&m)
		o := out[8*g : 8*g+64]
		for c := range m {
			binary.LittleEndian.PutUint64(o[8*c:], transposeBits8x8(m[c]))
		}
	}
	for ; g < nb; g++ {
		var x uint64
		for k := 0; k < 8; k++ {
			x |= uint64(rows[k*nb+g]) << (8 * k)
		}
		binary.LittleEndian.PutUint64(out[8*g:], transposeBits8x8(x))
	}
}

// undoDelta reverses Blosc2's delta filter on the block buf, which starts at
// byte offset start of the chunk dst. The first block was coded against its own
// previous element (so it is a running XOR); every later block against the same
// position of the first block, already decoded in dst. Elements are of the
// typesize when it is 1, 2, 4 or 8, 8 bytes for other multiples of 8 and bytes
// otherwise; a partial trailing element is left as it is.
func undoDelta(dst []byte, start, typesize int, buf []byte) {
	w := 1
	switch {
	case typesize == 2 || typesize == 4 || typesize == 8:
		w = typesize
	case typesize%8 == 0:
		w = 8
	}
	n := len(buf) / w
	if start == 0 {
		for i := 1; i < n; i++ {
			for k := 0; k < w; k++ {
				buf[i*w+k] ^= buf[(i-1)*w+k]
			}
		}
		return
	}
	ref := dst[:n*w]
	for i := range ref {
		buf[i] ^= ref[i]
	}
}
