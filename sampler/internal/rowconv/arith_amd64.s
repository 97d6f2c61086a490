#include "textflag.h"

// AVX2 arithmetic kernels for 8- and 16-bit integers and float16 (see arith_amd64.go): CF decoding,
// masks, normalisation and the NaN policy computed in registers with the scalar
// path's operations (float64 multiply, then add, rounded to float32; float64
// subtract and divide, rounded again), instead of looked up. New runs each one over
// every raw bit pattern and keeps it only when it reproduces the table bit for bit.
// The NT head and the last m%8 values of a row still come from the table. (SSE2
// versions, four values a step, were slower than the SSE2 table lookups: the SSE2 path
// looks up.)
//
// func arithX(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)
// flags: 1 non-temporal stores, 2 normalise, 4 NaN to zero. Registers as in
// rowconv_amd64.s; Y12 scale, Y13 offset, Y10 mean, Y11 std, Y8/Y9 masks, Y5 the
// masked value.

#define LUT16 MOVWLZX (SI), AX; MOVL (DX)(AX*4), AX; MOVL AX, (DI); ADDQ $2, SI; ADDQ $4, DI; DECQ CX
#define LUT8 MOVBLZX (SI), AX; MOVL (DX)(AX*4), AX; MOVL AX, (DI); ADDQ $1, SI; ADDQ $4, DI; DECQ CX

#define AARGS \
	MOVQ a+0(FP), AX \
	VBROADCASTSD 0(AX), Y12 \
	VBROADCASTSD 8(AX), Y13 \
	VBROADCASTSD 16(AX), Y10 \
	VBROADCASTSD 24(AX), Y11 \
	VPBROADCASTD 32(AX), Y8 \
	VPBROADCASTD 36(AX), Y9 \
	VPBROADCASTD 40(AX), Y5 \
	MOVQ t+8(FP), DX \
	MOVQ dst+16(FP), R8 \
	MOVQ dstStride+24(FP), R9 \
	MOVQ src+32(FP), R10 \
	MOVQ srcStride+40(FP), R11 \
	MOVQ n+48(FP), R12 \
	MOVQ m+56(FP), R13 \
	MOVQ flags+64(FP), BX

// AVX2 loads of 8 values: Y1 the lanes that are masked, Y3 and Y4 the values as
// float64 (lanes 0-3, 4-7). Integers are widened to int32 and compared with the
// integer masks; float16 is widened to float32 (F16C, exact) and compared with the
// masks as float32 (an ordered compare: -0 equals 0, NaN nothing, as in float64).
#define LOADI16 VPMOVSXWD (SI), Y0; VPCMPEQD Y8, Y0, Y1; VPCMPEQD Y9, Y0, Y2; VPOR Y2, Y1, Y1; VCVTDQ2PD X0, Y3; VEXTRACTI128 $1, Y0, X4; VCVTDQ2PD X4, Y4
#define LOADU16 VPMOVZXWD (SI), Y0; VPCMPEQD Y8, Y0, Y1; VPCMPEQD Y9, Y0, Y2; VPOR Y2, Y1, Y1; VCVTDQ2PD X0, Y3; VEXTRACTI128 $1, Y0, X4; VCVTDQ2PD X4, Y4
#define LOADI8 VPMOVSXBD (SI), Y0; VPCMPEQD Y8, Y0, Y1; VPCMPEQD Y9, Y0, Y2; VPOR Y2, Y1, Y1; VCVTDQ2PD X0, Y3; VEXTRACTI128 $1, Y0, X4; VCVTDQ2PD X4, Y4
#define LOADU8 VPMOVZXBD (SI), Y0; VPCMPEQD Y8, Y0, Y1; VPCMPEQD Y9, Y0, Y2; VPOR Y2, Y1, Y1; VCVTDQ2PD X0, Y3; VEXTRACTI128 $1, Y0, X4; VCVTDQ2PD X4, Y4
#define LOADF16 VCVTPH2PS (SI), Y0; VCMPPS $0, Y8, Y0, Y1; VCMPPS $0, Y9, Y0, Y2; VPOR Y2, Y1, Y1; VEXTRACTF128 $1, Y0, X4; VCVTPS2PD X0, Y3; VCVTPS2PD X4, Y4

// The whole AVX2 kernel: LOAD reads 8 values (step bytes), ONE converts one value
// through the table.
#define AVX2BODY(LOAD, step, ONE) \
	AARGS \
row: \
	TESTQ R12, R12 \
	JZ    done \
	MOVQ  R8, DI \
	MOVQ  R10, SI \
	MOVQ  R13, CX \
	TESTQ $1, BX \
	JZ    body \
head: \
	TESTQ $31, DI \
	JZ    body \
	TESTQ CX, CX \
	JZ    next \
	ONE \
	JMP   head \
body: \
	CMPQ CX, $8 \
	JB   tail \
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
keepnan: \
	TESTQ $1, BX \
	JNZ   ntstore \
	VMOVUPS Y3, (DI) \
	JMP   stored \
ntstore: \
	VMOVNTPS Y3, (DI) \
stored: \
	ADDQ $step, SI \
	ADDQ $32, DI \
	SUBQ $8, CX \
	JMP  body \
tail: \
	TESTQ CX, CX \
	JZ    next \
	ONE \
	JMP   tail \
next: \
	ADDQ R9, R8 \
	ADDQ R11, R10 \
	DECQ R12 \
	JMP  row \
done: \
	VZEROUPPER \
	RET

TEXT ·arithI16AVX2(SB), NOSPLIT, $0-72
	AVX2BODY(LOADI16, 16, LUT16)

TEXT ·arithU16AVX2(SB), NOSPLIT, $0-72
	AVX2BODY(LOADU16, 16, LUT16)

TEXT ·arithI8AVX2(SB), NOSPLIT, $0-72
	AVX2BODY(LOADI8, 8, LUT8)

TEXT ·arithU8AVX2(SB), NOSPLIT, $0-72
	AVX2BODY(LOADU8, 8, LUT8)

// AVX2 and F16C.
TEXT ·arithF16AVX2(SB), NOSPLIT, $0-72
	AVX2BODY(LOADF16, 16, LUT16)
