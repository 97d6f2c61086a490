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

// spread16 moves the 2 16-bit halves of x to the even 16-bit units of the result.
func spread16(x uint32) uint64 {
	v := uint64(x)
	return (v | v<<16) & 0x0000FFFF0000FFFF
}

func unshuffle2(dst, src []byte, n int) {
	p0, p1 := src[:n], src[n:2*n]
	i := 0
	for ; i+8 <= n; i += 8 {
		a := binary.LittleEndian.Uint64(p0[i:])
		b := binary.LittleEndian.Uint64(p1[i:])
		o := dst[2*i : 2*i+16]
		binary.LittleEndian.PutUint64(o[0:], spread8(uint32(a))|spread8(uint32(b))<<8)
		binary.LittleEndian.PutUint64(o[8:], spread8(uint32(a>>32))|spread8(uint32(b>>32))<<8)
	}
	for ; i < n; i++ {
		dst[2*i] = p0[i]
		dst[2*i+1] = p1[i]
	}
}

func unshuffle4(dst, src []byte, n int) {
	p0, p1, p2, p3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
	i := 0
	for ; i+8 <= n; i += 8 {
		a := binary.LittleEndian.Uint64(p0[i:])
		b := binary.LittleEndian.Uint64(p1[i:])
		c := binary.LittleEndian.Uint64(p2[i:])
		d := binary.LittleEndian.Uint64(p3[i:])
		// ab holds (a_k, b_k) byte pairs, cd (c_k, d_k); element k is (ab_k, cd_k).
		abLo := spread8(uint32(a)) | spread8(uint32(b))<<8
		abHi := spread8(uint32(a>>32)) | spread8(uint32(b>>32))<<8
		cdLo := spread8(uint32(c)) | spread8(uint32(d))<<8
		cdHi := spread8(uint32(c>>32)) | spread8(uint32(d>>32))<<8
		o := dst[4*i : 4*i+32]
		binary.LittleEndian.PutUint64(o[0:], spread16(uint32(abLo))|spread16(uint32(cdLo))<<16)
		binary.LittleEndian.PutUint64(o[8:], spread16(uint32(abLo>>32))|spread16(uint32(cdLo>>32))<<16)
		binary.LittleEndian.PutUint64(o[16:], spread16(uint32(abHi))|spread16(uint32(cdHi))<<16)
		binary.LittleEndian.PutUint64(o[24:], spread16(uint32(abHi>>32))|spread16(uint32(cdHi>>32))<<16)
	}
	for ; i < n; i++ {
		o := dst[4*i : 4*i+4]
		o[0], o[1], o[2], o[3] = p0[i], p1[i], p2[i], p3[i]
	}
}

// transpose8x8 transposes the 8x8 byte matrix whose row r is the little-endian
// word x[r]: afterwards byte c of x[r] is what was byte r of x[c].
func transpose8x8(x *[8]uint64) {
	const m1, m2, m3 = 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF
	for r := 0; r < 8; r += 2 {
		t := (x[r]>>8 ^ x[r+1]) & m1
		x[r+1] ^= t
		x[r] ^= t << 8
	}
	for r := 0; r < 8; r += 4 {
		for k := r; k < r+2; k++ {
			t := (x[k]>>16 ^ x[k+2]) & m2
			x[k+2] ^= t
			x[k] ^= t << 16
		}
	}
	for k := 0; k < 4; k++ {
		t := (x[k]>>32 ^ x[k+4]) & m3
		x[k+4] ^= t
		x[k] ^= t << 32
	}
}

func unshuffle8(dst, src []byte, n int) {
	var x [8]uint64
	i := 0
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

// bitunshuffle writes the bit-unshuffled block src into dst (distinct buffers).
func bitunshuffle(dst, src []byte, typesize int, blosc2 bool) {
	n := len(src) / typesize
	if n%8 != 0 {
		if !blosc2 {
			copy(dst, src)
			return
		}
		n -= n % 8
	}
	done := n * typesize
	bitunshuffleElems(dst[:done], src[:done], n, typesize)
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

func bitunshuffleElems(dst, src []byte, n, typesize int) {
	nb := n / 8 // bytes per bit row
	if typesize == 1 {
		rows := src[:8*nb]
		for g := 0; g < nb; g++ {
			var x uint64
			for k := 0; k < 8; k++ {
				x |= uint64(rows[k*nb+g]) << (8 * k)
			}
			binary.LittleEndian.PutUint64(dst[8*g:], transposeBits8x8(x))
		}
		return
	}
	for j := 0; j < typesize; j++ {
		rows := src[8*j*nb : 8*(j+1)*nb]
		for g := 0; g < nb; g++ {
			var x uint64
			for k := 0; k < 8; k++ {
				x |= uint64(rows[k*nb+g]) << (8 * k)
			}
			// Byte l of x now holds byte j of element 8g+l.
			x = transposeBits8x8(x)
			o := dst[8*g*typesize+j:]
			for l := 0; l < 8; l++ {
				o[l*typesize] = byte(x >> (8 * l))
			}
		}
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
