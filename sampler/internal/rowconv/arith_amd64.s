#include "textflag.h"

// Arithmetic kernels for 8- and 16-bit integers and float16 (see arith_amd64.go): CF decoding,
// masks, normalisation and the NaN policy computed in registers with the scalar
// path's operations (float64 multiply, then add, rounded to float32; float64
// subtract and divide, rounded again), instead of looked up. New runs each one over
// every raw bit pattern and keeps it only when it reproduces the table bit for bit.
// The NT head and the last m%8 (m%4) values of a row still come from the table.
//
// func arithX(a *arith, t *float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, flags int)
// flags: 1 non-temporal stores, 2 normalise, 4 NaN to zero. Registers as in
// rowconv_amd64.s; AVX2: Y12 scale, Y13 offset, Y10 mean, Y11 std, Y8/Y9 masks (int32),
// Y5 the masked value; SSE2 the same X registers, X7 zero.

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

#define SARGS \
	MOVQ a+0(FP), AX \
	MOVSD 0(AX), X12 \
	UNPCKLPD X12, X12 \
	MOVSD 8(AX), X13 \
	UNPCKLPD X13, X13 \
	MOVSD 16(AX), X10 \
	UNPCKLPD X10, X10 \
	MOVSD 24(AX), X11 \
	UNPCKLPD X11, X11 \
	MOVL 32(AX), X8 \
	PSHUFD $0, X8, X8 \
	MOVL 36(AX), X9 \
	PSHUFD $0, X9, X9 \
	MOVL 40(AX), X5 \
	PSHUFD $0, X5, X5 \
	PXOR X7, X7 \
	MOVQ t+8(FP), DX \
	MOVQ dst+16(FP), R8 \
	MOVQ dstStride+24(FP), R9 \
	MOVQ src+32(FP), R10 \
	MOVQ srcStride+40(FP), R11 \
	MOVQ n+48(FP), R12 \
	MOVQ m+56(FP), R13 \
	MOVQ flags+64(FP), BX

// Four values widened to int32 lanes of X0 (SSE2 has no PMOVSX/PMOVZX: unpack, then
// shift the sign down for the signed types).
#define WIDEN16S MOVQ (SI), X0; PUNPCKLWL X0, X0; PSRAL $16, X0
#define WIDEN16U MOVQ (SI), X0; PUNPCKLWL X7, X0
#define WIDEN8S MOVL (SI), X0; PUNPCKLBW X0, X0; PUNPCKLWL X0, X0; PSRAL $24, X0
#define WIDEN8U MOVL (SI), X0; PUNPCKLBW X7, X0; PUNPCKLWL X7, X0

#define SSE2BODY(WIDEN, step, ONE) \
	SARGS \
row: \
	TESTQ R12, R12 \
	JZ    done \
	MOVQ  R8, DI \
	MOVQ  R10, SI \
	MOVQ  R13, CX \
	TESTQ $1, BX \
	JZ    body \
head: \
	TESTQ $15, DI \
	JZ    body \
	TESTQ CX, CX \
	JZ    next \
	ONE \
	JMP   head \
body: \
	CMPQ CX, $4 \
	JB   tail \
	WIDEN \
	MOVO X0, X1 \
	PCMPEQL X8, X1 \
	MOVO X0, X2 \
	PCMPEQL X9, X2 \
	POR X2, X1 \
	CVTPL2PD X0, X3 \
	PSHUFD $0xee, X0, X4 \
	CVTPL2PD X4, X4 \
	MULPD X12, X3 \
	MULPD X12, X4 \
	ADDPD X13, X3 \
	ADDPD X13, X4 \
	CVTPD2PS X3, X3 \
	CVTPD2PS X4, X4 \
	MOVLHPS X4, X3 \
	MOVO X1, X2 \
	PAND X5, X2 \
	PANDN X3, X1 \
	POR X2, X1 \
	MOVO X1, X3 \
	TESTQ $2, BX \
	JZ    nonorm \
	CVTPS2PD X3, X4 \
	MOVHLPS X3, X2 \
	CVTPS2PD X2, X2 \
	SUBPD X10, X4 \
	SUBPD X10, X2 \
	DIVPD X11, X4 \
	DIVPD X11, X2 \
	CVTPD2PS X4, X4 \
	CVTPD2PS X2, X2 \
	MOVLHPS X2, X4 \
	MOVO X4, X3 \
nonorm: \
	TESTQ $4, BX \
	JZ    keepnan \
	MOVO X3, X2 \
	CMPPS X2, X2, $3 \
	ANDNPS X3, X2 \
	MOVO X2, X3 \
keepnan: \
	TESTQ $1, BX \
	JNZ   ntstore \
	MOVUPS X3, (DI) \
	JMP   stored \
ntstore: \
	MOVNTPS X3, (DI) \
stored: \
	ADDQ $step, SI \
	ADDQ $16, DI \
	SUBQ $4, CX \
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

TEXT ·arithI16SSE2(SB), NOSPLIT, $0-72
	SSE2BODY(WIDEN16S, 8, LUT16)

TEXT ·arithU16SSE2(SB), NOSPLIT, $0-72
	SSE2BODY(WIDEN16U, 8, LUT16)

TEXT ·arithI8SSE2(SB), NOSPLIT, $0-72
	SSE2BODY(WIDEN8S, 4, LUT8)

TEXT ·arithU8SSE2(SB), NOSPLIT, $0-72
	SSE2BODY(WIDEN8U, 4, LUT8)
