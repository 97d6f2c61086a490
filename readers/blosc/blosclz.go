package blosc

import "fmt"

// BloscLZ is an LZ77 format derived from FastLZ. A stream is a sequence of
// items, each starting with a control byte c (only the low 5 bits of the first
// one count, and the first item is always literals):
//
//   - c < 32: a literal run of c+1 bytes follows.
//   - c >= 32: a match. Its length is (c>>5)+2 (3..8); when c>>5 is 7 the length
//     continues with extension bytes added to 9, up to and including the first
//     that is not 255. Then one byte k: the distance back is (c&31)<<8 + k + 1.
//     When k is 255 and c&31 is 31 two more bytes follow, a big-endian d16, and
//     the distance is d16 + 8192 (the far form).
//
// Matches may overlap the bytes they produce (distance < length).
const blosclzMaxDistance = 8191

// blosclzDecompress decodes src into dst and returns the number of bytes written.
func blosclzDecompress(dst, src []byte) (int, error) {
	if len(src) == 0 {
		return 0, nil
	}
	ip, op := 1, 0
	ctrl := int(src[0] & 31)
	for {
		if ctrl >= 32 {
			length := ctrl>>5 - 1
			ofs := (ctrl & 31) << 8
			if length == 6 {
				for {
					if ip >= len(src) {
						return op, fmt.Errorf("match length runs past the input at %d: %w", ip, ErrCorrupt)
					}
					code := int(src[ip])
					ip++
					length += code
					if code != 255 {
						break
					}
				}
			}
			if ip >= len(src) {
				return op, fmt.Errorf("match distance runs past the input at %d: %w", ip, ErrCorrupt)
			}
			code := int(src[ip])
			ip++
			length += 3
			dist := ofs + code + 1
			if code == 255 && ofs == 31<<8 {
				if ip+2 > len(src) {
					return op, fmt.Errorf("far match distance runs past the input at %d: %w", ip, ErrCorrupt)
				}
				dist = (int(src[ip])<<8 | int(src[ip+1])) + blosclzMaxDistance + 1
				ip += 2
			}
			if length > len(dst)-op {
				return op, fmt.Errorf("match of %d bytes at output %d overruns the %d-byte block: %w", length, op, len(dst), ErrCorrupt)
			}
			if dist > op {
				return op, fmt.Errorf("match distance %d at output %d reaches before the start: %w", dist, op, ErrCorrupt)
			}
			copyMatch(dst, op, dist, length)
			op += length
		} else {
			n := ctrl + 1
			if n > len(dst)-op {
				return op, fmt.Errorf("literal run of %d bytes at output %d overruns the %d-byte block: %w", n, op, len(dst), ErrCorrupt)
			}
			if n > len(src)-ip {
				return op, fmt.Errorf("literal run of %d bytes at input %d runs past the input: %w", n, ip, ErrCorrupt)
			}
			if op+32 <= len(dst) && ip+32 <= len(src) {
				// Fixed-size copy (two 16-byte moves); bytes past n are rewritten later.
				*(*[32]byte)(dst[op : op+32]) = *(*[32]byte)(src[ip : ip+32])
			} else {
				copy(dst[op:op+n], src[ip:ip+n])
			}
			op += n
			ip += n
		}
		if ip >= len(src) {
			return op, nil
		}
		ctrl = int(src[ip])
		ip++
	}
}

// copyMatch appends length bytes to dst[:op] copied from dist bytes back; the
// source may overlap the destination. The caller has checked the bounds.
func copyMatch(dst []byte, op, dist, length int) {
	if dist >= 16 && op+length+16 <= len(dst) {
		// 16-byte pieces, each reading bytes already written; up to 15 bytes
		// past the match are scribbled on and rewritten by what follows.
		for w := op; w < op+length; w += 16 {
			*(*[16]byte)(dst[w : w+16]) = *(*[16]byte)(dst[w-dist : w-dist+16])
		}
		return
	}
	if dist >= 8 && op+length+8 <= len(dst) {
		for w := op; w < op+length; w += 8 {
			*(*[8]byte)(dst[w : w+8]) = *(*[8]byte)(dst[w-dist : w-dist+8])
		}
		return
	}
	if dist >= length {
		copy(dst[op:op+length], dst[op-dist:op])
		return
	}
	if dist == 1 {
		fill(dst[op:op+length], dst[op-1])
		return
	}
	// Overlapping: the source is a pattern of period dist; copy it in doubling
	// pieces, each a whole number of periods.
	end := op + length
	for w := op; w < end; {
		w += copy(dst[w:end], dst[op-dist:w])
	}
}
