#include "textflag.h"

// Row kernels (the Go side is dispatch_amd64.go and arith_amd64.go, which check every
// length first). Every kernel has the signature
//
//	func k(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int, next *byte)
//
// and converts or copies n rows of m values: row r reads src + r*srcStride and writes
// dst + r*dstStride (strides in bytes). t is the table of final float32 values by raw
// bit pattern (lookups, and the values the vector steps leave over); a holds the
// arithmetic kernels' numbers. flags: 1 non-temporal stores, 2 normalise, 4 NaN to
// zero. next, when not nil, is where the caller's next call's rows start (rows srcStride
// apart too): row r of it is prefetched with row r. With non-temporal stores, the values before dst reaches the vector alignment
// and the last values of a row (fewer than a vector) are stored normally.
//
// Registers: DX t, R8 dst row, R9 dstStride, R10 src row, R11 srcStride, R12 rows
// left, R13 m, BX flags, R15 next (R15 is free: nothing here reads a global); per row DI dst, SI src, CX values left; AX scratch. Each
// vector step leaves its result in Y3 (X3).

#define ARGS \
	MOVQ t+8(FP), DX \
	MOVQ dst+16(FP), R8 \
	MOVQ dstStride+24(FP), R9 \
	MOVQ src+32(FP), R10 \
	MOVQ srcStride+40(FP), R11 \
	MOVQ n+48(FP), R12 \
	MOVQ m+56(FP), R13 \
	MOVQ flags+64(FP), BX \
	MOVQ next+72(FP), R15

// ROWS is a whole kernel: VEC converts vecN values (step source bytes, esz bytes a
// value) into Y3/X3, which STORE or NTSTORE write; ONE does one value with an ordinary
// store; dst is aligned for NTSTORE when DI&align is 0; EXIT returns.
//
// A kernel first prefetches source rows 1-3 and each row the one PF rows ahead: the arithmetic kernels
// spend many instructions on a row, so without it few rows' loads are in flight and
// the gather waits on memory. A row of at least vecN values has no scalar steps: its
// last values are one more vector ending at the row's end (overlapping values already
// written, with the same values), and with non-temporal stores its first vector is an
// ordinary unaligned store, after which dst is advanced to the vector alignment. R14
// says which of these the shared vector step (vec) is doing: 0 the body, 1 the head,
// 2 the tail (R14 is free in assembly: the ABI wrapper restores g after the call).
#define PF 4
#define ROWS(VEC, vecN, step, esz, align, ONE, STORE, NTSTORE, EXIT) \
	MOVQ  R10, AX \
	ADDQ  R11, AX \
	PREFETCHT0 (AX) \
	PREFETCHT0 63(AX) \
	ADDQ  R11, AX \
	PREFETCHT0 (AX) \
	PREFETCHT0 63(AX) \
	ADDQ  R11, AX \
	PREFETCHT0 (AX) \
	PREFETCHT0 63(AX) \
row: \
	TESTQ R12, R12 \
	JZ    done \
	LEAQ  (R10)(R11*PF), AX \
	PREFETCHT0 (AX) \
	PREFETCHT0 63(AX) \
	TESTQ R15, R15 \
	JZ    own \
	PREFETCHT0 (R15) \
	PREFETCHT0 63(R15) \
	ADDQ  R11, R15 \
own: \
	MOVQ  R8, DI \
	MOVQ  R10, SI \
	MOVQ  R13, CX \
	XORL  R14, R14 \
	CMPQ  CX, $vecN \
	JB    scalar \
	TESTQ $1, BX \
	JZ    vec \
	TESTQ $align, DI \
	JZ    vec \
	MOVL  $1, R14 \
	JMP   vec \
body: \
	CMPQ CX, $vecN \
	JB   tail \
vec: \
	VEC \
	TESTQ R14, R14 \
	JNZ   edge \
	TESTQ $1, BX \
	JNZ   ntstore \
	STORE \
	JMP   stored \
ntstore: \
	NTSTORE \
stored: \
	ADDQ $step, SI \
	ADDQ $(4*vecN), DI \
	SUBQ $vecN, CX \
	JMP  body \
edge: \
	STORE \
	CMPQ R14, $1 \
	JNE  next \
	XORL R14, R14 \
	MOVQ DI, AX \
	NEGQ AX \
	ANDQ $align, AX \
	ADDQ AX, DI \
	SHRQ $2, AX \
	SUBQ AX, CX \
	LEAQ (SI)(AX*esz), SI \
	JMP  body \
tail: \
	TESTQ CX, CX \
	JZ    next \
	MOVQ  $vecN, AX \
	SUBQ  CX, AX \
	NEGQ  AX \
	LEAQ  (SI)(AX*esz), SI \
	LEAQ  (DI)(AX*4), DI \
	MOVL  $2, R14 \
	JMP   vec \
scalar: \
	ONE \
	TESTQ CX, CX \
	JNZ   scalar \
next: \
	ADDQ R9, R8 \
	ADDQ R11, R10 \
	DECQ R12 \
	JMP  row \
done: \
	EXIT

#define YSTORE VMOVUPS Y3, (DI)
#define YNTSTORE VMOVNTPS Y3, (DI)
#define XSTORE MOVUPS X3, (DI)
#define XNTSTORE MOVNTPS X3, (DI)
#define YEXIT VZEROUPPER; RET
#define XEXIT RET

// One value: through the table (16- or 8-bit index), or copied.
#define ONE16 MOVWLZX (SI), AX; MOVL (DX)(AX*4), AX; MOVL AX, (DI); ADDQ $2, SI; ADDQ $4, DI; DECQ CX
#define ONE8 MOVBLZX (SI), AX; MOVL (DX)(AX*4), AX; MOVL AX, (DI); ADDQ $1, SI; ADDQ $4, DI; DECQ CX
#define ONE32 MOVL (SI), AX; MOVL AX, (DI); ADDQ $4, SI; ADDQ $4, DI; DECQ CX

// Copies: 8 (AVX2) or 4 (SSE2) float32 values.
#define COPY8 VMOVUPS (SI), Y3
#define COPY4 MOVUPS (SI), X3

// AVX2 gathers of 8 table values: the indices widened to int32 lanes, an all-ones
// mask (the gather clears it), into a zeroed register (no dependence on its last
// value).
#define GATHER16 VPMOVZXWD (SI), Y1; VPCMPEQD Y0, Y0, Y0; VPXOR Y3, Y3, Y3; VPGATHERDD Y0, (DX)(Y1*4), Y3
#define GATHER8 VPMOVZXBD (SI), Y1; VPCMPEQD Y0, Y0, Y0; VPXOR Y3, Y3, Y3; VPGATHERDD Y0, (DX)(Y1*4), Y3

// SSE2 lookups of 4 table values (no gather before AVX2), packed into X3.
#define LOOK4(ld, o1, o2, o3) \
	ld (SI), AX \
	MOVL (DX)(AX*4), X3 \
	ld o1(SI), AX \
	MOVL (DX)(AX*4), X0 \
	ld o2(SI), AX \
	MOVL (DX)(AX*4), X1 \
	ld o3(SI), AX \
	MOVL (DX)(AX*4), X2 \
	PUNPCKLLQ X0, X3 \
	PUNPCKLLQ X2, X1 \
	PUNPCKLQDQ X1, X3
#define LOOK16 LOOK4(MOVWLZX, 2, 4, 6)
#define LOOK8 LOOK4(MOVBLZX, 1, 2, 3)

// The arithmetic kernels compute the scalar path's chain in registers: Y12 scale,
// Y13 offset, Y10 mean, Y11 std, Y8/Y9 the masks, Y5 the masked value's bits, loaded
// from a (see arith in arith_amd64.go).
#define AARGS \
	MOVQ a+0(FP), AX \
	VBROADCASTSD 0(AX), Y12 \
	VBROADCASTSD 8(AX), Y13 \
	VBROADCASTSD 16(AX), Y10 \
	VBROADCASTSD 24(AX), Y11 \
	VPBROADCASTD 32(AX), Y8 \
	VPBROADCASTD 36(AX), Y9 \
	VPBROADCASTD 40(AX), Y5

// Loads of 8 values: Y1 the lanes that are masked, Y3 and Y4 the values as float64
// (lanes 0-3, 4-7). Integers are widened to int32 and compared with the integer
// masks; float16 is widened to float32 (F16C, exact) and compared with the masks as
// float32 (an ordered compare: -0 equals 0, NaN nothing, as in float64).
#define INTLOAD(widen) widen (SI), Y0; VPCMPEQD Y8, Y0, Y1; VPCMPEQD Y9, Y0, Y2; VPOR Y2, Y1, Y1; VCVTDQ2PD X0, Y3; VEXTRACTI128 $1, Y0, X4; VCVTDQ2PD X4, Y4
#define LOADI16 INTLOAD(VPMOVSXWD)
#define LOADU16 INTLOAD(VPMOVZXWD)
#define LOADI8 INTLOAD(VPMOVSXBD)
#define LOADU8 INTLOAD(VPMOVZXBD)
#define LOADF16 VCVTPH2PS (SI), Y0; VCMPPS $0, Y8, Y0, Y1; VCMPPS $0, Y9, Y0, Y2; VPOR Y2, Y1, Y1; VEXTRACTF128 $1, Y0, X4; VCVTPS2PD X0, Y3; VCVTPS2PD X4, Y4

// ARITH8: CF as the scalar path computes it (float64 multiply, then add, rounded to
// float32), masked lanes replaced, then with flag 2 the normalisation (widen, float64
// subtract and divide, round) and with flag 4 NaN to zero.
#define ARITH8(LOAD) \
	LOAD \
	VMULPD Y12, Y3, Y3 \
	VMULPD Y12, Y4, Y4 \
	VADDPD Y13, Y3, Y3 \
	VADDPD Y13, Y4, Y4 \
	VCVTPD2PSY Y3, X3 \
	VCVTPD2PSY Y4, X4 \
	VINSERTF128 $1, X4, Y3, Y3 \
	VBLENDVPS Y1, Y5, Y3, Y3 \
	TESTQ $2, BX \
	JZ    nonorm \
	VEXTRACTF128 $1, Y3, X4 \
	VCVTPS2PD X3, Y3 \
	VCVTPS2PD X4, Y4 \
	VSUBPD Y10, Y3, Y3 \
	VSUBPD Y10, Y4, Y4 \
	VDIVPD Y11, Y3, Y3 \
	VDIVPD Y11, Y4, Y4 \
	VCVTPD2PSY Y3, X3 \
	VCVTPD2PSY Y4, X4 \
	VINSERTF128 $1, X4, Y3, Y3 \
nonorm: \
	TESTQ $4, BX \
	JZ    keepnan \
	VCMPPS $3, Y3, Y3, Y2 \
	VANDNPS Y3, Y2, Y3 \
keepnan:

// The float32 kernel (arithF32AVX2) computes post.apply on float32 values: widened to
// float64 (exact), clipped, normalised (subtract, divide), rounded to float32, NaN to zero
// where Y8 is all ones. It has no branches: parameters that change nothing (clip to
// [-Inf, +Inf], mean 0, std 1) give back every value but a signalling NaN's bits, and the
// kernel is set up only where the values are normalised or NaN becomes 0 (arith_amd64.go).
// The instructions are those the scalar path compiles to, so the bits are the same: Go's
// max and min order +0 above -0, which MAXPD and MINPD do not (they return one operand
// for equal ones), so where a value equals a bound the lane takes their AND (max) or OR
// (min) of the two: +0 against -0 as Go, any other equal pair unchanged. The bound is
// MAXPD's first operand so that a NaN value passes through, as the scalar path skips it.
// Y6 ClipMin, Y7 ClipMax, Y10 mean, Y11 std, Y8 the NaN-to-zero mask; Y1, Y2 scratch.
#define F32ARGS \
	MOVQ a+0(FP), AX \
	VBROADCASTSD 16(AX), Y10 \
	VBROADCASTSD 24(AX), Y11 \
	VBROADCASTSD 48(AX), Y6 \
	VBROADCASTSD 56(AX), Y7 \
	VPBROADCASTD 44(AX), Y8

#define CLIPPD(R) \
	VCMPPD $0, Y6, R, Y1 \
	VANDPD Y6, R, Y2 \
	VMAXPD R, Y6, R \
	VBLENDVPD Y1, Y2, R, R \
	VCMPPD $0, Y7, R, Y1 \
	VORPD Y7, R, Y2 \
	VMINPD R, Y7, R \
	VBLENDVPD Y1, Y2, R, R

// F32COMP: the chain on the 8 float32 values in Y3, result in Y3.
#define F32COMP \
	VEXTRACTF128 $1, Y3, X4 \
	VCVTPS2PD X3, Y3 \
	VCVTPS2PD X4, Y4 \
	CLIPPD(Y3) \
	CLIPPD(Y4) \
	VSUBPD Y10, Y3, Y3 \
	VSUBPD Y10, Y4, Y4 \
	VDIVPD Y11, Y3, Y3 \
	VDIVPD Y11, Y4, Y4 \
	VCVTPD2PSY Y3, X3 \
	VCVTPD2PSY Y4, X4 \
	VINSERTF128 $1, X4, Y3, Y3 \
	VCMPPS $3, Y3, Y3, Y2 \
	VANDPS Y8, Y2, Y2 \
	VANDNPS Y3, Y2, Y3

#define F32VEC VMOVUPS (SI), Y3; F32COMP
// One value: the same chain on lane 0 (VMOVSS clears the others).
#define F32ONE VMOVSS (SI), X3; F32COMP; VMOVSS X3, (DI); ADDQ $4, SI; ADDQ $4, DI; DECQ CX

#define AI16 ARITH8(LOADI16)
#define AU16 ARITH8(LOADU16)
#define AI8 ARITH8(LOADI8)
#define AU8 ARITH8(LOADU8)
#define AF16 ARITH8(LOADF16)

TEXT ·lut16AVX2(SB), NOSPLIT, $0-80
	ARGS
	ROWS(GATHER16, 8, 16, 2, 31, ONE16, YSTORE, YNTSTORE, YEXIT)

TEXT ·lut8AVX2(SB), NOSPLIT, $0-80
	ARGS
	ROWS(GATHER8, 8, 8, 1, 31, ONE8, YSTORE, YNTSTORE, YEXIT)

TEXT ·copyAVX2(SB), NOSPLIT, $0-80
	ARGS
	ROWS(COPY8, 8, 32, 4, 31, ONE32, YSTORE, YNTSTORE, YEXIT)

TEXT ·lut16SSE2(SB), NOSPLIT, $0-80
	ARGS
	ROWS(LOOK16, 4, 8, 2, 15, ONE16, XSTORE, XNTSTORE, XEXIT)

TEXT ·lut8SSE2(SB), NOSPLIT, $0-80
	ARGS
	ROWS(LOOK8, 4, 4, 1, 15, ONE8, XSTORE, XNTSTORE, XEXIT)

TEXT ·copySSE2(SB), NOSPLIT, $0-80
	ARGS
	ROWS(COPY4, 4, 16, 4, 15, ONE32, XSTORE, XNTSTORE, XEXIT)

TEXT ·arithI16AVX2(SB), NOSPLIT, $0-80
	AARGS
	ARGS
	ROWS(AI16, 8, 16, 2, 31, ONE16, YSTORE, YNTSTORE, YEXIT)

TEXT ·arithU16AVX2(SB), NOSPLIT, $0-80
	AARGS
	ARGS
	ROWS(AU16, 8, 16, 2, 31, ONE16, YSTORE, YNTSTORE, YEXIT)

TEXT ·arithI8AVX2(SB), NOSPLIT, $0-80
	AARGS
	ARGS
	ROWS(AI8, 8, 8, 1, 31, ONE8, YSTORE, YNTSTORE, YEXIT)

TEXT ·arithU8AVX2(SB), NOSPLIT, $0-80
	AARGS
	ARGS
	ROWS(AU8, 8, 8, 1, 31, ONE8, YSTORE, YNTSTORE, YEXIT)

// AVX2 and F16C.
TEXT ·arithF16AVX2(SB), NOSPLIT, $0-80
	AARGS
	ARGS
	ROWS(AF16, 8, 16, 2, 31, ONE16, YSTORE, YNTSTORE, YEXIT)

// AVX2: float32 values normalised (F32COMP).
TEXT ·arithF32AVX2(SB), NOSPLIT, $0-80
	F32ARGS
	ARGS
	ROWS(F32VEC, 8, 32, 4, 31, F32ONE, YSTORE, YNTSTORE, YEXIT)

// func Fence()
TEXT ·Fence(SB), NOSPLIT, $0-0
	SFENCE
	RET

