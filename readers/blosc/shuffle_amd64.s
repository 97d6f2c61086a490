#include "textflag.h"

// SSE2 (every amd64 CPU has it) byte unshuffle kernels. Each loop step reads 16
// bytes from every byte plane and writes the 16 elements they hold. The Go
// wrappers in shuffle_amd64.go check the lengths and do the tails.

// func unshuffle2x16(dst, p0, p1 *byte, groups int)
// dst[32g : 32g+32] = the 16 two-byte elements from p0[16g:], p1[16g:].
TEXT ·unshuffle2x16(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ p0+8(FP), SI
	MOVQ p1+16(FP), DX
	MOVQ groups+24(FP), CX
loop2:
	TESTQ CX, CX
	JZ    done2
	MOVOU (SI), X0      // byte 0 of elements 0..15
	MOVOU (DX), X1      // byte 1 of elements 0..15
	MOVOU X0, X2
	PUNPCKLBW X1, X0    // elements 0..7
	PUNPCKHBW X1, X2    // elements 8..15
	MOVOU X0, (DI)
	MOVOU X2, 16(DI)
	ADDQ  $16, SI
	ADDQ  $16, DX
	ADDQ  $32, DI
	DECQ  CX
	JMP   loop2
done2:
	RET

// func unshuffle8x16(dst, src *byte, n, groups int)
// Plane j starts at src + j*n. dst[128g : 128g+128] = the 16 eight-byte elements
// whose bytes are at src[j*n + 16g : +16], j = 0..7. Three rounds of unpacks
// interleave bytes, then 2-byte pairs, then 4-byte quads.
TEXT ·unshuffle8x16(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), BX
	MOVQ groups+24(FP), CX
	LEAQ (BX)(BX*2), DX // 3n
	LEAQ (SI)(BX*4), R8 // plane 4
loop8:
	TESTQ CX, CX
	JZ    done8
	MOVOU (SI), X0        // plane 0
	MOVOU (SI)(BX*1), X1  // plane 1
	MOVOU (SI)(BX*2), X2  // plane 2
	MOVOU (SI)(DX*1), X3  // plane 3
	MOVOU (R8), X4        // plane 4
	MOVOU (R8)(BX*1), X5  // plane 5
	MOVOU (R8)(BX*2), X6  // plane 6
	MOVOU (R8)(DX*1), X7  // plane 7

	// Round 1: bytes. X0/X8 = planes 0,1 for elements 0..7/8..15, and so on.
	MOVOU X0, X8
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X8
	MOVOU X2, X9
	PUNPCKLBW X3, X2
	PUNPCKHBW X3, X9
	MOVOU X4, X10
	PUNPCKLBW X5, X4
	PUNPCKHBW X5, X10
	MOVOU X6, X11
	PUNPCKLBW X7, X6
	PUNPCKHBW X7, X11

	// Round 2: 2-byte pairs. Bytes 0..3 of elements 0..3 (X0), 4..7 (X1),
	// 8..11 (X8), 12..15 (X3); bytes 4..7 likewise in X4, X5, X10, X7.
	MOVOU X0, X1
	PUNPCKLWL X2, X0
	PUNPCKHWL X2, X1
	MOVOU X8, X3
	PUNPCKLWL X9, X8
	PUNPCKHWL X9, X3
	MOVOU X4, X5
	PUNPCKLWL X6, X4
	PUNPCKHWL X6, X5
	MOVOU X10, X7
	PUNPCKLWL X11, X10
	PUNPCKHWL X11, X7

	// Round 3: 4-byte quads give whole elements, two per register.
	MOVOU X0, X2
	PUNPCKLLQ X4, X0     // elements 0, 1
	PUNPCKHLQ X4, X2     // elements 2, 3
	MOVOU X1, X6
	PUNPCKLLQ X5, X1     // elements 4, 5
	PUNPCKHLQ X5, X6     // elements 6, 7
	MOVOU X8, X9
	PUNPCKLLQ X10, X8    // elements 8, 9
	PUNPCKHLQ X10, X9    // elements 10, 11
	MOVOU X3, X11
	PUNPCKLLQ X7, X3     // elements 12, 13
	PUNPCKHLQ X7, X11    // elements 14, 15

	MOVOU X0, (DI)
	MOVOU X2, 16(DI)
	MOVOU X1, 32(DI)
	MOVOU X6, 48(DI)
	MOVOU X8, 64(DI)
	MOVOU X9, 80(DI)
	MOVOU X3, 96(DI)
	MOVOU X11, 112(DI)
	ADDQ  $16, SI
	ADDQ  $16, R8
	ADDQ  $128, DI
	DECQ  CX
	JMP   loop8
done8:
	RET

// func unshuffle4x16(dst, src *byte, n, groups int)
// Plane j starts at src + j*n. dst[64g : 64g+64] = the 16 four-byte elements whose
// bytes are at src[j*n + 16g : +16], j = 0..3: bytes, then 2-byte pairs.
TEXT ·unshuffle4x16(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), BX
	MOVQ groups+24(FP), CX
	LEAQ (BX)(BX*2), DX // 3n
loop4:
	TESTQ CX, CX
	JZ    done4
	MOVOU (SI), X0        // plane 0
	MOVOU (SI)(BX*1), X1  // plane 1
	MOVOU (SI)(BX*2), X2  // plane 2
	MOVOU (SI)(DX*1), X3  // plane 3

	MOVOU X0, X4
	PUNPCKLBW X1, X0      // bytes 0,1 of elements 0..7
	PUNPCKHBW X1, X4      // bytes 0,1 of elements 8..15
	MOVOU X2, X5
	PUNPCKLBW X3, X2      // bytes 2,3 of elements 0..7
	PUNPCKHBW X3, X5      // bytes 2,3 of elements 8..15

	MOVOU X0, X1
	PUNPCKLWL X2, X0      // elements 0..3
	PUNPCKHWL X2, X1      // elements 4..7
	MOVOU X4, X3
	PUNPCKLWL X5, X4      // elements 8..11
	PUNPCKHWL X5, X3      // elements 12..15

	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	MOVOU X4, 32(DI)
	MOVOU X3, 48(DI)
	ADDQ  $16, SI
	ADDQ  $64, DI
	DECQ  CX
	JMP   loop4
done4:
	RET
