#include "textflag.h"

// Row kernels (see dispatch_amd64.go, which checks every length first). Each converts
// or copies n rows of m values: row r reads src + r*srcStride and writes
// dst + r*dstStride (strides in bytes). With nt set the stores that can be are
// non-temporal: the values before dst reaches the vector alignment and the last m%8
// (m%4) values are stored normally. The lut kernels look every stored value up in
// the table of final float32 values (t, indexed by the raw bit pattern).
//
// Registers: DX table, R8 dst row, R9 dstStride, R10 src row, R11 srcStride, R12 rows
// left, R13 m, BX nt; per row DI dst, SI src, CX values left.

#define ARGS \
	MOVQ t+0(FP), DX \
	MOVQ dst+8(FP), R8 \
	MOVQ dstStride+16(FP), R9 \
	MOVQ src+24(FP), R10 \
	MOVQ srcStride+32(FP), R11 \
	MOVQ n+40(FP), R12 \
	MOVQ m+48(FP), R13 \
	MOVBLZX nt+56(FP), BX

// One value through the table: 16- or 8-bit index, normal or non-temporal store.
#define ONE16 MOVWLZX (SI), AX; MOVL (DX)(AX*4), AX; MOVL AX, (DI); ADDQ $2, SI; ADDQ $4, DI; DECQ CX
#define ONE8 MOVBLZX (SI), AX; MOVL (DX)(AX*4), AX; MOVL AX, (DI); ADDQ $1, SI; ADDQ $4, DI; DECQ CX
#define ONE16NT MOVWLZX (SI), AX; MOVL (DX)(AX*4), AX; MOVNTIL AX, (DI); ADDQ $2, SI; ADDQ $4, DI; DECQ CX
#define ONE8NT MOVBLZX (SI), AX; MOVL (DX)(AX*4), AX; MOVNTIL AX, (DI); ADDQ $1, SI; ADDQ $4, DI; DECQ CX

// Eight values gathered (AVX2): widen the indices (VPMOVZX), gather with an all-ones
// mask (the gather clears it), into a zeroed register (no dependence on its last value).
#define GATHER8(widen, off, idx, msk, out) \
	widen off(SI), idx \
	VPCMPEQD msk, msk, msk \
	VPXOR out, out, out \
	VPGATHERDD msk, (DX)(idx*4), out

// Float32 copies. Registers as above without the table.
#define CARGS \
	MOVQ dst+0(FP), R8 \
	MOVQ dstStride+8(FP), R9 \
	MOVQ src+16(FP), R10 \
	MOVQ srcStride+24(FP), R11 \
	MOVQ n+32(FP), R12 \
	MOVQ m+40(FP), R13 \
	MOVBLZX nt+48(FP), BX

#define ONE32 MOVL (SI), AX; MOVL AX, (DI); ADDQ $4, SI; ADDQ $4, DI; DECQ CX

// func lut16AVX2(t *[65536]float32, dst *float32, dstStride int, src *uint16, srcStride int, n, m int, nt bool)
TEXT ·lut16AVX2(SB), NOSPLIT, $0-57
	ARGS
l16a_row:
	TESTQ R12, R12
	JZ    l16a_done
	MOVQ  R8, DI
	MOVQ  R10, SI
	MOVQ  R13, CX
	TESTQ BX, BX
	JZ    l16a_body16
l16a_head:
	TESTQ $31, DI
	JZ    l16a_nt16
	TESTQ CX, CX
	JZ    l16a_next
	ONE16
	JMP   l16a_head
l16a_nt16:
	CMPQ CX, $16
	JB   l16a_nt8
	GATHER8(VPMOVZXWD, 0, Y1, Y0, Y2)
	GATHER8(VPMOVZXWD, 16, Y4, Y3, Y5)
	VMOVNTPS Y2, (DI)
	VMOVNTPS Y5, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  l16a_nt16
l16a_nt8:
	CMPQ CX, $8
	JB   l16a_tail
	GATHER8(VPMOVZXWD, 0, Y1, Y0, Y2)
	VMOVNTPS Y2, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  l16a_tail
l16a_body16:
	CMPQ CX, $16
	JB   l16a_body8
	GATHER8(VPMOVZXWD, 0, Y1, Y0, Y2)
	GATHER8(VPMOVZXWD, 16, Y4, Y3, Y5)
	VMOVUPS Y2, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  l16a_body16
l16a_body8:
	CMPQ CX, $8
	JB   l16a_tail
	GATHER8(VPMOVZXWD, 0, Y1, Y0, Y2)
	VMOVUPS Y2, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
l16a_tail:
	TESTQ CX, CX
	JZ    l16a_next
	ONE16
	JMP   l16a_tail
l16a_next:
	ADDQ R9, R8
	ADDQ R11, R10
	DECQ R12
	JMP  l16a_row
l16a_done:
	VZEROUPPER
	RET

// func lut8AVX2(t *[256]float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, nt bool)
TEXT ·lut8AVX2(SB), NOSPLIT, $0-57
	ARGS
l8a_row:
	TESTQ R12, R12
	JZ    l8a_done
	MOVQ  R8, DI
	MOVQ  R10, SI
	MOVQ  R13, CX
	TESTQ BX, BX
	JZ    l8a_body16
l8a_head:
	TESTQ $31, DI
	JZ    l8a_nt16
	TESTQ CX, CX
	JZ    l8a_next
	ONE8
	JMP   l8a_head
l8a_nt16:
	CMPQ CX, $16
	JB   l8a_nt8
	GATHER8(VPMOVZXBD, 0, Y1, Y0, Y2)
	GATHER8(VPMOVZXBD, 8, Y4, Y3, Y5)
	VMOVNTPS Y2, (DI)
	VMOVNTPS Y5, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  l8a_nt16
l8a_nt8:
	CMPQ CX, $8
	JB   l8a_tail
	GATHER8(VPMOVZXBD, 0, Y1, Y0, Y2)
	VMOVNTPS Y2, (DI)
	ADDQ $8, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  l8a_tail
l8a_body16:
	CMPQ CX, $16
	JB   l8a_body8
	GATHER8(VPMOVZXBD, 0, Y1, Y0, Y2)
	GATHER8(VPMOVZXBD, 8, Y4, Y3, Y5)
	VMOVUPS Y2, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  l8a_body16
l8a_body8:
	CMPQ CX, $8
	JB   l8a_tail
	GATHER8(VPMOVZXBD, 0, Y1, Y0, Y2)
	VMOVUPS Y2, (DI)
	ADDQ $8, SI
	ADDQ $32, DI
	SUBQ $8, CX
l8a_tail:
	TESTQ CX, CX
	JZ    l8a_next
	ONE8
	JMP   l8a_tail
l8a_next:
	ADDQ R9, R8
	ADDQ R11, R10
	DECQ R12
	JMP  l8a_row
l8a_done:
	VZEROUPPER
	RET

// func lut16SSE2(t *[65536]float32, dst *float32, dstStride int, src *uint16, srcStride int, n, m int, nt bool)
// No gather before AVX2: scalar lookups, four a step; non-temporal stores are MOVNTI
// (any 4-byte-aligned address).
TEXT ·lut16SSE2(SB), NOSPLIT, $0-57
	ARGS
l16s_row:
	TESTQ R12, R12
	JZ    l16s_done
	MOVQ  R8, DI
	MOVQ  R10, SI
	MOVQ  R13, CX
	CMPB  nt+56(FP), $0
	JNE   l16s_nt
l16s_body:
	CMPQ CX, $4
	JB   l16s_tail
	MOVWLZX (SI), AX
	MOVWLZX 2(SI), BX
	MOVL    (DX)(AX*4), AX
	MOVL    (DX)(BX*4), BX
	MOVL    AX, (DI)
	MOVL    BX, 4(DI)
	MOVWLZX 4(SI), AX
	MOVWLZX 6(SI), BX
	MOVL    (DX)(AX*4), AX
	MOVL    (DX)(BX*4), BX
	MOVL    AX, 8(DI)
	MOVL    BX, 12(DI)
	ADDQ    $8, SI
	ADDQ    $16, DI
	SUBQ    $4, CX
	JMP     l16s_body
l16s_nt:
	CMPQ CX, $4
	JB   l16s_tail
	MOVWLZX (SI), AX
	MOVWLZX 2(SI), BX
	MOVL    (DX)(AX*4), AX
	MOVL    (DX)(BX*4), BX
	MOVNTIL AX, (DI)
	MOVNTIL BX, 4(DI)
	MOVWLZX 4(SI), AX
	MOVWLZX 6(SI), BX
	MOVL    (DX)(AX*4), AX
	MOVL    (DX)(BX*4), BX
	MOVNTIL AX, 8(DI)
	MOVNTIL BX, 12(DI)
	ADDQ    $8, SI
	ADDQ    $16, DI
	SUBQ    $4, CX
	JMP     l16s_nt
l16s_tail:
	TESTQ CX, CX
	JZ    l16s_next
	ONE16
	JMP   l16s_tail
l16s_next:
	ADDQ R9, R8
	ADDQ R11, R10
	DECQ R12
	JMP  l16s_row
l16s_done:
	RET

// func lut8SSE2(t *[256]float32, dst *float32, dstStride int, src *byte, srcStride int, n, m int, nt bool)
TEXT ·lut8SSE2(SB), NOSPLIT, $0-57
	ARGS
l8s_row:
	TESTQ R12, R12
	JZ    l8s_done
	MOVQ  R8, DI
	MOVQ  R10, SI
	MOVQ  R13, CX
	CMPB  nt+56(FP), $0
	JNE   l8s_nt
l8s_body:
	CMPQ CX, $4
	JB   l8s_tail
	MOVBLZX (SI), AX
	MOVBLZX 1(SI), BX
	MOVL    (DX)(AX*4), AX
	MOVL    (DX)(BX*4), BX
	MOVL    AX, (DI)
	MOVL    BX, 4(DI)
	MOVBLZX 2(SI), AX
	MOVBLZX 3(SI), BX
	MOVL    (DX)(AX*4), AX
	MOVL    (DX)(BX*4), BX
	MOVL    AX, 8(DI)
	MOVL    BX, 12(DI)
	ADDQ    $4, SI
	ADDQ    $16, DI
	SUBQ    $4, CX
	JMP     l8s_body
l8s_nt:
	CMPQ CX, $4
	JB   l8s_tail
	MOVBLZX (SI), AX
	MOVBLZX 1(SI), BX
	MOVL    (DX)(AX*4), AX
	MOVL    (DX)(BX*4), BX
	MOVNTIL AX, (DI)
	MOVNTIL BX, 4(DI)
	MOVBLZX 2(SI), AX
	MOVBLZX 3(SI), BX
	MOVL    (DX)(AX*4), AX
	MOVL    (DX)(BX*4), BX
	MOVNTIL AX, 8(DI)
	MOVNTIL BX, 12(DI)
	ADDQ    $4, SI
	ADDQ    $16, DI
	SUBQ    $4, CX
	JMP     l8s_nt
l8s_tail:
	TESTQ CX, CX
	JZ    l8s_next
	ONE8
	JMP   l8s_tail
l8s_next:
	ADDQ R9, R8
	ADDQ R11, R10
	DECQ R12
	JMP  l8s_row
l8s_done:
	RET

// func copyAVX2(dst *float32, dstStride int, src *float32, srcStride int, n, m int, nt bool)
TEXT ·copyAVX2(SB), NOSPLIT, $0-49
	CARGS
ca_row:
	TESTQ R12, R12
	JZ    ca_done
	MOVQ  R8, DI
	MOVQ  R10, SI
	MOVQ  R13, CX
	TESTQ BX, BX
	JZ    ca_body32
ca_head:
	TESTQ $31, DI
	JZ    ca_nt32
	TESTQ CX, CX
	JZ    ca_next
	ONE32
	JMP   ca_head
ca_nt32:
	CMPQ CX, $32
	JB   ca_nt8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VMOVNTPS Y0, (DI)
	VMOVNTPS Y1, 32(DI)
	VMOVNTPS Y2, 64(DI)
	VMOVNTPS Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  ca_nt32
ca_nt8:
	CMPQ CX, $8
	JB   ca_tail
	VMOVUPS (SI), Y0
	VMOVNTPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  ca_nt8
ca_body32:
	CMPQ CX, $32
	JB   ca_body8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  ca_body32
ca_body8:
	CMPQ CX, $8
	JB   ca_tail
	VMOVUPS (SI), Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  ca_body8
ca_tail:
	TESTQ CX, CX
	JZ    ca_next
	ONE32
	JMP   ca_tail
ca_next:
	ADDQ R9, R8
	ADDQ R11, R10
	DECQ R12
	JMP  ca_row
ca_done:
	VZEROUPPER
	RET

// func copySSE2(dst *float32, dstStride int, src *float32, srcStride int, n, m int, nt bool)
TEXT ·copySSE2(SB), NOSPLIT, $0-49
	CARGS
cs_row:
	TESTQ R12, R12
	JZ    cs_done
	MOVQ  R8, DI
	MOVQ  R10, SI
	MOVQ  R13, CX
	TESTQ BX, BX
	JZ    cs_body16
cs_head:
	TESTQ $15, DI
	JZ    cs_nt16
	TESTQ CX, CX
	JZ    cs_next
	ONE32
	JMP   cs_head
cs_nt16:
	CMPQ CX, $16
	JB   cs_nt4
	MOVUPS (SI), X0
	MOVUPS 16(SI), X1
	MOVUPS 32(SI), X2
	MOVUPS 48(SI), X3
	MOVNTPS X0, (DI)
	MOVNTPS X1, 16(DI)
	MOVNTPS X2, 32(DI)
	MOVNTPS X3, 48(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  cs_nt16
cs_nt4:
	CMPQ CX, $4
	JB   cs_tail
	MOVUPS (SI), X0
	MOVNTPS X0, (DI)
	ADDQ $16, SI
	ADDQ $16, DI
	SUBQ $4, CX
	JMP  cs_nt4
cs_body16:
	CMPQ CX, $16
	JB   cs_body4
	MOVUPS (SI), X0
	MOVUPS 16(SI), X1
	MOVUPS 32(SI), X2
	MOVUPS 48(SI), X3
	MOVUPS X0, (DI)
	MOVUPS X1, 16(DI)
	MOVUPS X2, 32(DI)
	MOVUPS X3, 48(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  cs_body16
cs_body4:
	CMPQ CX, $4
	JB   cs_tail
	MOVUPS (SI), X0
	MOVUPS X0, (DI)
	ADDQ $16, SI
	ADDQ $16, DI
	SUBQ $4, CX
	JMP  cs_body4
cs_tail:
	TESTQ CX, CX
	JZ    cs_next
	ONE32
	JMP   cs_tail
cs_next:
	ADDQ R9, R8
	ADDQ R11, R10
	DECQ R12
	JMP  cs_row
cs_done:
	RET

// func Fence()
TEXT ·Fence(SB), NOSPLIT, $0-0
	SFENCE
	RET
