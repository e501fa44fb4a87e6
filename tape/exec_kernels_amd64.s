//go:build !purego

#include "textflag.h"

// AVX2 kernels of matKernel (exec_kernels.go): four rows or one row of
// sums over a block, term by term. Every lane is computed as the Go code
// computes it: VFMADD231PD is math.FMA, VMULPD then VADDPD the rounded
// product and the sum.

// Term operations: FMAY/FMAX s = fma(c, v, s); MADY/MADX s = s + c·v.
#define FMAY(c, v, s) VFMADD231PD c, v, s
#define MADY(c, v, s) VMULPD c, v, Y15; VADDPD Y15, s, s
#define FMAX(c, v, s) VFMADD231SD c, v, s
#define MADX(c, v, s) VMULSD c, v, X15; VADDSD X15, s, s

// ROWS4 is the body of fma4AVX and mad4AVX: rows d0…d3 (R8…R11), packed
// coefficients c (SI, four a term), term vectors vec (DI, slice headers),
// nt ≥ 1 terms (CX), m lanes (DX); the sums start (start) from the rows'
// values (0), the first term's products (1) or the row's values at b
// (2: uniform initial values). Lanes go eight, then
// four, then one at a time (AX); R12, R13, R14 walk the coefficients, the
// vectors and the count of terms.
#define ROWS4(OPY, OPX) \
	MOVQ d0+0(FP), R8 \
	MOVQ d1+8(FP), R9 \
	MOVQ d2+16(FP), R10 \
	MOVQ d3+24(FP), R11 \
	MOVQ c+32(FP), SI \
	MOVQ vec+40(FP), DI \
	MOVQ nt+48(FP), CX \
	MOVQ m+56(FP), DX \
	XORQ AX, AX \
l8: \
	LEAQ 8(AX), BX \
	CMPQ BX, DX \
	JGT  l4 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
	CMPB start+72(FP), $1 \
	JEQ  i8 \
	JGT  b8 \
	VMOVUPD (R8)(AX*8), Y0 \
	VMOVUPD 32(R8)(AX*8), Y1 \
	VMOVUPD (R9)(AX*8), Y2 \
	VMOVUPD 32(R9)(AX*8), Y3 \
	VMOVUPD (R10)(AX*8), Y4 \
	VMOVUPD 32(R10)(AX*8), Y5 \
	VMOVUPD (R11)(AX*8), Y6 \
	VMOVUPD 32(R11)(AX*8), Y7 \
	JMP  t8 \
b8: \
	MOVQ b+64(FP), BX \
	VBROADCASTSD (BX), Y0 \
	VMOVAPD Y0, Y1 \
	VBROADCASTSD 8(BX), Y2 \
	VMOVAPD Y2, Y3 \
	VBROADCASTSD 16(BX), Y4 \
	VMOVAPD Y4, Y5 \
	VBROADCASTSD 24(BX), Y6 \
	VMOVAPD Y6, Y7 \
	JMP  t8 \
i8: \
	MOVQ (R13), BX \
	VMOVUPD (BX)(AX*8), Y8 \
	VMOVUPD 32(BX)(AX*8), Y9 \
	VBROADCASTSD (R12), Y10 \
	VMULPD Y10, Y8, Y0 \
	VMULPD Y10, Y9, Y1 \
	VBROADCASTSD 8(R12), Y11 \
	VMULPD Y11, Y8, Y2 \
	VMULPD Y11, Y9, Y3 \
	VBROADCASTSD 16(R12), Y12 \
	VMULPD Y12, Y8, Y4 \
	VMULPD Y12, Y9, Y5 \
	VBROADCASTSD 24(R12), Y13 \
	VMULPD Y13, Y8, Y6 \
	VMULPD Y13, Y9, Y7 \
	ADDQ $32, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
t8: \
	TESTQ R14, R14 \
	JEQ  s8 \
	MOVQ (R13), BX \
	VMOVUPD (BX)(AX*8), Y8 \
	VMOVUPD 32(BX)(AX*8), Y9 \
	VBROADCASTSD (R12), Y10 \
	OPY(Y10, Y8, Y0) \
	OPY(Y10, Y9, Y1) \
	VBROADCASTSD 8(R12), Y11 \
	OPY(Y11, Y8, Y2) \
	OPY(Y11, Y9, Y3) \
	VBROADCASTSD 16(R12), Y12 \
	OPY(Y12, Y8, Y4) \
	OPY(Y12, Y9, Y5) \
	VBROADCASTSD 24(R12), Y13 \
	OPY(Y13, Y8, Y6) \
	OPY(Y13, Y9, Y7) \
	ADDQ $32, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JMP  t8 \
s8: \
	VMOVUPD Y0, (R8)(AX*8) \
	VMOVUPD Y1, 32(R8)(AX*8) \
	VMOVUPD Y2, (R9)(AX*8) \
	VMOVUPD Y3, 32(R9)(AX*8) \
	VMOVUPD Y4, (R10)(AX*8) \
	VMOVUPD Y5, 32(R10)(AX*8) \
	VMOVUPD Y6, (R11)(AX*8) \
	VMOVUPD Y7, 32(R11)(AX*8) \
	ADDQ $8, AX \
	JMP  l8 \
l4: \
	LEAQ 4(AX), BX \
	CMPQ BX, DX \
	JGT  l1 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
	CMPB start+72(FP), $1 \
	JEQ  i4 \
	JGT  b4 \
	VMOVUPD (R8)(AX*8), Y0 \
	VMOVUPD (R9)(AX*8), Y2 \
	VMOVUPD (R10)(AX*8), Y4 \
	VMOVUPD (R11)(AX*8), Y6 \
	JMP  t4 \
b4: \
	MOVQ b+64(FP), BX \
	VBROADCASTSD (BX), Y0 \
	VBROADCASTSD 8(BX), Y2 \
	VBROADCASTSD 16(BX), Y4 \
	VBROADCASTSD 24(BX), Y6 \
	JMP  t4 \
i4: \
	MOVQ (R13), BX \
	VMOVUPD (BX)(AX*8), Y8 \
	VBROADCASTSD (R12), Y10 \
	VMULPD Y10, Y8, Y0 \
	VBROADCASTSD 8(R12), Y11 \
	VMULPD Y11, Y8, Y2 \
	VBROADCASTSD 16(R12), Y12 \
	VMULPD Y12, Y8, Y4 \
	VBROADCASTSD 24(R12), Y13 \
	VMULPD Y13, Y8, Y6 \
	ADDQ $32, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
t4: \
	TESTQ R14, R14 \
	JEQ  s4 \
	MOVQ (R13), BX \
	VMOVUPD (BX)(AX*8), Y8 \
	VBROADCASTSD (R12), Y10 \
	OPY(Y10, Y8, Y0) \
	VBROADCASTSD 8(R12), Y11 \
	OPY(Y11, Y8, Y2) \
	VBROADCASTSD 16(R12), Y12 \
	OPY(Y12, Y8, Y4) \
	VBROADCASTSD 24(R12), Y13 \
	OPY(Y13, Y8, Y6) \
	ADDQ $32, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JMP  t4 \
s4: \
	VMOVUPD Y0, (R8)(AX*8) \
	VMOVUPD Y2, (R9)(AX*8) \
	VMOVUPD Y4, (R10)(AX*8) \
	VMOVUPD Y6, (R11)(AX*8) \
	ADDQ $4, AX \
l1: \
	CMPQ AX, DX \
	JGE  done \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
	CMPB start+72(FP), $1 \
	JEQ  i1 \
	JGT  b1 \
	VMOVSD (R8)(AX*8), X0 \
	VMOVSD (R9)(AX*8), X2 \
	VMOVSD (R10)(AX*8), X4 \
	VMOVSD (R11)(AX*8), X6 \
	JMP  t1 \
b1: \
	MOVQ b+64(FP), BX \
	VMOVSD (BX), X0 \
	VMOVSD 8(BX), X2 \
	VMOVSD 16(BX), X4 \
	VMOVSD 24(BX), X6 \
	JMP  t1 \
i1: \
	MOVQ (R13), BX \
	VMOVSD (BX)(AX*8), X8 \
	VMULSD (R12), X8, X0 \
	VMULSD 8(R12), X8, X2 \
	VMULSD 16(R12), X8, X4 \
	VMULSD 24(R12), X8, X6 \
	ADDQ $32, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
t1: \
	TESTQ R14, R14 \
	JEQ  s1 \
	MOVQ (R13), BX \
	VMOVSD (BX)(AX*8), X8 \
	VMOVSD (R12), X10 \
	OPX(X10, X8, X0) \
	VMOVSD 8(R12), X11 \
	OPX(X11, X8, X2) \
	VMOVSD 16(R12), X12 \
	OPX(X12, X8, X4) \
	VMOVSD 24(R12), X13 \
	OPX(X13, X8, X6) \
	ADDQ $32, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JMP  t1 \
s1: \
	VMOVSD X0, (R8)(AX*8) \
	VMOVSD X2, (R9)(AX*8) \
	VMOVSD X4, (R10)(AX*8) \
	VMOVSD X6, (R11)(AX*8) \
	INCQ AX \
	JMP  l1 \
done: \
	VZEROUPPER \
	RET

// ROWS1 is the body of fma1AVX and mad1AVX: one row d (R8), coefficients
// c (SI, one a term), vectors vec (DI), nt ≥ 1 terms (CX), m lanes (DX),
// b and start as for ROWS4; lanes thirty-two (eight sums in registers:
// enough independent chains to cover the latency of a multiply-add at two
// a cycle), then sixteen, then four, then one at a time.
#define ROWS1(OPY, OPX) \
	MOVQ d+0(FP), R8 \
	MOVQ c+8(FP), SI \
	MOVQ vec+16(FP), DI \
	MOVQ nt+24(FP), CX \
	MOVQ m+32(FP), DX \
	XORQ AX, AX \
l32: \
	LEAQ 32(AX), BX \
	CMPQ BX, DX \
	JGT  l16 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
	CMPB start+48(FP), $1 \
	JEQ  i32 \
	JGT  b32 \
	VMOVUPD (R8)(AX*8), Y0 \
	VMOVUPD 32(R8)(AX*8), Y1 \
	VMOVUPD 64(R8)(AX*8), Y2 \
	VMOVUPD 96(R8)(AX*8), Y3 \
	VMOVUPD 128(R8)(AX*8), Y4 \
	VMOVUPD 160(R8)(AX*8), Y5 \
	VMOVUPD 192(R8)(AX*8), Y6 \
	VMOVUPD 224(R8)(AX*8), Y7 \
	JMP  t32 \
b32: \
	MOVQ b+40(FP), BX \
	VBROADCASTSD (BX), Y0 \
	VMOVAPD Y0, Y1 \
	VMOVAPD Y0, Y2 \
	VMOVAPD Y0, Y3 \
	VMOVAPD Y0, Y4 \
	VMOVAPD Y0, Y5 \
	VMOVAPD Y0, Y6 \
	VMOVAPD Y0, Y7 \
	JMP  t32 \
i32: \
	MOVQ (R13), BX \
	VBROADCASTSD (R12), Y14 \
	VMULPD (BX)(AX*8), Y14, Y0 \
	VMULPD 32(BX)(AX*8), Y14, Y1 \
	VMULPD 64(BX)(AX*8), Y14, Y2 \
	VMULPD 96(BX)(AX*8), Y14, Y3 \
	VMULPD 128(BX)(AX*8), Y14, Y4 \
	VMULPD 160(BX)(AX*8), Y14, Y5 \
	VMULPD 192(BX)(AX*8), Y14, Y6 \
	VMULPD 224(BX)(AX*8), Y14, Y7 \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
t32: \
	TESTQ R14, R14 \
	JEQ  s32 \
	MOVQ (R13), BX \
	VBROADCASTSD (R12), Y14 \
	VMOVUPD (BX)(AX*8), Y8 \
	VMOVUPD 32(BX)(AX*8), Y9 \
	VMOVUPD 64(BX)(AX*8), Y11 \
	VMOVUPD 96(BX)(AX*8), Y12 \
	OPY(Y14, Y8, Y0) \
	OPY(Y14, Y9, Y1) \
	OPY(Y14, Y11, Y2) \
	OPY(Y14, Y12, Y3) \
	VMOVUPD 128(BX)(AX*8), Y8 \
	VMOVUPD 160(BX)(AX*8), Y9 \
	VMOVUPD 192(BX)(AX*8), Y11 \
	VMOVUPD 224(BX)(AX*8), Y12 \
	OPY(Y14, Y8, Y4) \
	OPY(Y14, Y9, Y5) \
	OPY(Y14, Y11, Y6) \
	OPY(Y14, Y12, Y7) \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JMP  t32 \
s32: \
	VMOVUPD Y0, (R8)(AX*8) \
	VMOVUPD Y1, 32(R8)(AX*8) \
	VMOVUPD Y2, 64(R8)(AX*8) \
	VMOVUPD Y3, 96(R8)(AX*8) \
	VMOVUPD Y4, 128(R8)(AX*8) \
	VMOVUPD Y5, 160(R8)(AX*8) \
	VMOVUPD Y6, 192(R8)(AX*8) \
	VMOVUPD Y7, 224(R8)(AX*8) \
	ADDQ $32, AX \
	JMP  l32 \
l16: \
	LEAQ 16(AX), BX \
	CMPQ BX, DX \
	JGT  l4 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
	CMPB start+48(FP), $1 \
	JEQ  i16 \
	JGT  b16 \
	VMOVUPD (R8)(AX*8), Y0 \
	VMOVUPD 32(R8)(AX*8), Y1 \
	VMOVUPD 64(R8)(AX*8), Y2 \
	VMOVUPD 96(R8)(AX*8), Y3 \
	JMP  t16 \
b16: \
	MOVQ b+40(FP), BX \
	VBROADCASTSD (BX), Y0 \
	VMOVAPD Y0, Y1 \
	VMOVAPD Y0, Y2 \
	VMOVAPD Y0, Y3 \
	JMP  t16 \
i16: \
	MOVQ (R13), BX \
	VBROADCASTSD (R12), Y10 \
	VMULPD (BX)(AX*8), Y10, Y0 \
	VMULPD 32(BX)(AX*8), Y10, Y1 \
	VMULPD 64(BX)(AX*8), Y10, Y2 \
	VMULPD 96(BX)(AX*8), Y10, Y3 \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
t16: \
	TESTQ R14, R14 \
	JEQ  s16 \
	MOVQ (R13), BX \
	VBROADCASTSD (R12), Y10 \
	VMOVUPD (BX)(AX*8), Y4 \
	VMOVUPD 32(BX)(AX*8), Y5 \
	VMOVUPD 64(BX)(AX*8), Y6 \
	VMOVUPD 96(BX)(AX*8), Y7 \
	OPY(Y10, Y4, Y0) \
	OPY(Y10, Y5, Y1) \
	OPY(Y10, Y6, Y2) \
	OPY(Y10, Y7, Y3) \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JMP  t16 \
s16: \
	VMOVUPD Y0, (R8)(AX*8) \
	VMOVUPD Y1, 32(R8)(AX*8) \
	VMOVUPD Y2, 64(R8)(AX*8) \
	VMOVUPD Y3, 96(R8)(AX*8) \
	ADDQ $16, AX \
	JMP  l16 \
l4: \
	LEAQ 4(AX), BX \
	CMPQ BX, DX \
	JGT  l1 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
	CMPB start+48(FP), $1 \
	JEQ  i4 \
	JGT  b4 \
	VMOVUPD (R8)(AX*8), Y0 \
	JMP  t4 \
b4: \
	MOVQ b+40(FP), BX \
	VBROADCASTSD (BX), Y0 \
	JMP  t4 \
i4: \
	MOVQ (R13), BX \
	VBROADCASTSD (R12), Y10 \
	VMULPD (BX)(AX*8), Y10, Y0 \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
t4: \
	TESTQ R14, R14 \
	JEQ  s4 \
	MOVQ (R13), BX \
	VBROADCASTSD (R12), Y10 \
	VMOVUPD (BX)(AX*8), Y4 \
	OPY(Y10, Y4, Y0) \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JMP  t4 \
s4: \
	VMOVUPD Y0, (R8)(AX*8) \
	ADDQ $4, AX \
	JMP  l4 \
l1: \
	CMPQ AX, DX \
	JGE  done \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
	CMPB start+48(FP), $1 \
	JEQ  i1 \
	JGT  b1 \
	VMOVSD (R8)(AX*8), X0 \
	JMP  t1 \
b1: \
	MOVQ b+40(FP), BX \
	VMOVSD (BX), X0 \
	JMP  t1 \
i1: \
	MOVQ (R13), BX \
	VMOVSD (BX)(AX*8), X4 \
	VMULSD (R12), X4, X0 \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
t1: \
	TESTQ R14, R14 \
	JEQ  s1 \
	MOVQ (R13), BX \
	VMOVSD (R12), X10 \
	VMOVSD (BX)(AX*8), X4 \
	OPX(X10, X4, X0) \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JMP  t1 \
s1: \
	VMOVSD X0, (R8)(AX*8) \
	INCQ AX \
	JMP  l1 \
done: \
	VZEROUPPER \
	RET

// func fma4AVX(d0, d1, d2, d3, c *float64, vec *[]float64, nt, m int, b *float64, start int8)
TEXT ·fma4AVX(SB), NOSPLIT, $0-73
	ROWS4(FMAY, FMAX)

// func mad4AVX(d0, d1, d2, d3, c *float64, vec *[]float64, nt, m int, b *float64, start int8)
TEXT ·mad4AVX(SB), NOSPLIT, $0-73
	ROWS4(MADY, MADX)

// func fma1AVX(d, c *float64, vec *[]float64, nt, m int, b *float64, start int8)
TEXT ·fma1AVX(SB), NOSPLIT, $0-49
	ROWS1(FMAY, FMAX)

// func mad1AVX(d, c *float64, vec *[]float64, nt, m int, b *float64, start int8)
TEXT ·mad1AVX(SB), NOSPLIT, $0-49
	ROWS1(MADY, MADX)

// func cpuid(eaxIn, ecxIn uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxIn+0(FP), AX
	MOVL ecxIn+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func chainAVX(s *[]float64, flags *uint8, nterms *int32, ne, m int)
//
// The kernel of chainKernel: s holds the ne destinations, then every
// entry's terms' arguments; flags holds every term's flags (bit 0 a
// product, bit 1 subtracted, bit 2 a factor of the sum, bit 3 its first
// argument uniform, bit 4 a product's second argument uniform: a
// one-value slice, broadcast); nterms the number of terms of each entry.
// Lanes go sixteen, then four, then one at a time (AX); R12 and R13 walk
// an entry's argument headers and flags, R14 counts its terms.
TEXT ·chainAVX(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), R10
	MOVQ flags+8(FP), DI
	MOVQ nterms+16(FP), R8
	MOVQ ne+24(FP), CX
	MOVQ m+32(FP), DX
	LEAQ (CX)(CX*2), R11
	LEAQ (R10)(R11*8), R11 // the first argument header

entry:
	TESTQ CX, CX
	JEQ   done
	MOVQ  (R10), R9
	MOVLQSX (R8), SI
	XORQ  AX, AX

c16:
	LEAQ 16(AX), BX
	CMPQ BX, DX
	JGT  c4
	MOVQ R11, R12
	MOVQ DI, R13
	MOVQ SI, R14
	MOVQ  (R12), BX
	TESTB $8, (R13)
	JNE   f16ua
	VMOVUPD (BX)(AX*8), Y0
	VMOVUPD 32(BX)(AX*8), Y1
	VMOVUPD 64(BX)(AX*8), Y2
	VMOVUPD 96(BX)(AX*8), Y3
	JMP   f16ad
f16ua:
	VBROADCASTSD (BX), Y0
	VMOVAPD Y0, Y1
	VMOVAPD Y0, Y2
	VMOVAPD Y0, Y3
f16ad:
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   f16
	MOVQ  (R12), BX
	TESTB $16, (R13)
	JNE   f16ub
	VMULPD (BX)(AX*8), Y0, Y0
	VMULPD 32(BX)(AX*8), Y1, Y1
	VMULPD 64(BX)(AX*8), Y2, Y2
	VMULPD 96(BX)(AX*8), Y3, Y3
	JMP   f16bd
f16ub:
	VBROADCASTSD (BX), Y8
	VMULPD Y8, Y0, Y0
	VMULPD Y8, Y1, Y1
	VMULPD Y8, Y2, Y2
	VMULPD Y8, Y3, Y3
f16bd:
	ADDQ  $24, R12
f16:
	INCQ R13
	DECQ R14
	JEQ  s16
t16:
	MOVQ  (R12), BX
	TESTB $8, (R13)
	JNE   g16ua
	VMOVUPD (BX)(AX*8), Y4
	VMOVUPD 32(BX)(AX*8), Y5
	VMOVUPD 64(BX)(AX*8), Y6
	VMOVUPD 96(BX)(AX*8), Y7
	JMP   g16ad
g16ua:
	VBROADCASTSD (BX), Y4
	VMOVAPD Y4, Y5
	VMOVAPD Y4, Y6
	VMOVAPD Y4, Y7
g16ad:
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   v16
	MOVQ  (R12), BX
	TESTB $16, (R13)
	JNE   g16ub
	VMULPD (BX)(AX*8), Y4, Y4
	VMULPD 32(BX)(AX*8), Y5, Y5
	VMULPD 64(BX)(AX*8), Y6, Y6
	VMULPD 96(BX)(AX*8), Y7, Y7
	JMP   g16bd
g16ub:
	VBROADCASTSD (BX), Y8
	VMULPD Y8, Y4, Y4
	VMULPD Y8, Y5, Y5
	VMULPD Y8, Y6, Y6
	VMULPD Y8, Y7, Y7
g16bd:
	ADDQ  $24, R12
v16:
	TESTB $4, (R13)
	JNE   m16
	TESTB $2, (R13)
	JNE   n16
	VADDPD Y4, Y0, Y0
	VADDPD Y5, Y1, Y1
	VADDPD Y6, Y2, Y2
	VADDPD Y7, Y3, Y3
	JMP   e16
n16:
	VSUBPD Y4, Y0, Y0
	VSUBPD Y5, Y1, Y1
	VSUBPD Y6, Y2, Y2
	VSUBPD Y7, Y3, Y3
	JMP   e16
m16:
	VMULPD Y4, Y0, Y0
	VMULPD Y5, Y1, Y1
	VMULPD Y6, Y2, Y2
	VMULPD Y7, Y3, Y3
e16:
	INCQ R13
	DECQ R14
	JNE  t16
s16:
	VMOVUPD Y0, (R9)(AX*8)
	VMOVUPD Y1, 32(R9)(AX*8)
	VMOVUPD Y2, 64(R9)(AX*8)
	VMOVUPD Y3, 96(R9)(AX*8)
	ADDQ $16, AX
	JMP  c16

c4:
	LEAQ 4(AX), BX
	CMPQ BX, DX
	JGT  c1
	MOVQ R11, R12
	MOVQ DI, R13
	MOVQ SI, R14
	MOVQ  (R12), BX
	TESTB $8, (R13)
	JNE   f4ua
	VMOVUPD (BX)(AX*8), Y0
	JMP   f4ad
f4ua:
	VBROADCASTSD (BX), Y0
f4ad:
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   f4
	MOVQ  (R12), BX
	TESTB $16, (R13)
	JNE   f4ub
	VMULPD (BX)(AX*8), Y0, Y0
	JMP   f4bd
f4ub:
	VBROADCASTSD (BX), Y8
	VMULPD Y8, Y0, Y0
f4bd:
	ADDQ  $24, R12
f4:
	INCQ R13
	DECQ R14
	JEQ  s4
t4:
	MOVQ  (R12), BX
	TESTB $8, (R13)
	JNE   g4ua
	VMOVUPD (BX)(AX*8), Y4
	JMP   g4ad
g4ua:
	VBROADCASTSD (BX), Y4
g4ad:
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   v4
	MOVQ  (R12), BX
	TESTB $16, (R13)
	JNE   g4ub
	VMULPD (BX)(AX*8), Y4, Y4
	JMP   g4bd
g4ub:
	VBROADCASTSD (BX), Y8
	VMULPD Y8, Y4, Y4
g4bd:
	ADDQ  $24, R12
v4:
	TESTB $4, (R13)
	JNE   m4
	TESTB $2, (R13)
	JNE   n4
	VADDPD Y4, Y0, Y0
	JMP   e4
n4:
	VSUBPD Y4, Y0, Y0
	JMP   e4
m4:
	VMULPD Y4, Y0, Y0
e4:
	INCQ R13
	DECQ R14
	JNE  t4
s4:
	VMOVUPD Y0, (R9)(AX*8)
	ADDQ $4, AX
	JMP  c4

c1:
	CMPQ AX, DX
	JGE  next
	MOVQ R11, R12
	MOVQ DI, R13
	MOVQ SI, R14
	MOVQ  (R12), BX
	TESTB $8, (R13)
	JNE   f1ua
	VMOVSD (BX)(AX*8), X0
	JMP   f1ad
f1ua:
	VMOVSD (BX), X0
f1ad:
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   f1
	MOVQ  (R12), BX
	TESTB $16, (R13)
	JNE   f1ub
	VMULSD (BX)(AX*8), X0, X0
	JMP   f1bd
f1ub:
	VMULSD (BX), X0, X0
f1bd:
	ADDQ  $24, R12
f1:
	INCQ R13
	DECQ R14
	JEQ  s1
t1:
	MOVQ  (R12), BX
	TESTB $8, (R13)
	JNE   g1ua
	VMOVSD (BX)(AX*8), X4
	JMP   g1ad
g1ua:
	VMOVSD (BX), X4
g1ad:
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   v1
	MOVQ  (R12), BX
	TESTB $16, (R13)
	JNE   g1ub
	VMULSD (BX)(AX*8), X4, X4
	JMP   g1bd
g1ub:
	VMULSD (BX), X4, X4
g1bd:
	ADDQ  $24, R12
v1:
	TESTB $4, (R13)
	JNE   m1
	TESTB $2, (R13)
	JNE   n1
	VADDSD X4, X0, X0
	JMP   e1
n1:
	VSUBSD X4, X0, X0
	JMP   e1
m1:
	VMULSD X4, X0, X0
e1:
	INCQ R13
	DECQ R14
	JNE  t1
s1:
	VMOVSD X0, (R9)(AX*8)
	INCQ AX
	JMP  c1

next:
	MOVQ R12, R11
	ADDQ SI, DI
	ADDQ $4, R8
	ADDQ $24, R10
	DECQ CX
	JMP  entry

done:
	VZEROUPPER
	RET

// Constants of tanhAVX, each four times (for memory operands): those of
// math.tanh and of math.Exp's FMA path (exp_amd64.s), which it repeats
// operation for operation.
DATA tanhdata<>+0(SB)/8, $0x7fffffffffffffff
DATA tanhdata<>+8(SB)/8, $0x7fffffffffffffff
DATA tanhdata<>+16(SB)/8, $0x7fffffffffffffff
DATA tanhdata<>+24(SB)/8, $0x7fffffffffffffff
DATA tanhdata<>+32(SB)/8, $0x8000000000000000
DATA tanhdata<>+40(SB)/8, $0x8000000000000000
DATA tanhdata<>+48(SB)/8, $0x8000000000000000
DATA tanhdata<>+56(SB)/8, $0x8000000000000000
DATA tanhdata<>+64(SB)/8, $-9.64399179425052238628e-1
DATA tanhdata<>+72(SB)/8, $-9.64399179425052238628e-1
DATA tanhdata<>+80(SB)/8, $-9.64399179425052238628e-1
DATA tanhdata<>+88(SB)/8, $-9.64399179425052238628e-1
DATA tanhdata<>+96(SB)/8, $-9.92877231001918586564e1
DATA tanhdata<>+104(SB)/8, $-9.92877231001918586564e1
DATA tanhdata<>+112(SB)/8, $-9.92877231001918586564e1
DATA tanhdata<>+120(SB)/8, $-9.92877231001918586564e1
DATA tanhdata<>+128(SB)/8, $-1.61468768441708447952e3
DATA tanhdata<>+136(SB)/8, $-1.61468768441708447952e3
DATA tanhdata<>+144(SB)/8, $-1.61468768441708447952e3
DATA tanhdata<>+152(SB)/8, $-1.61468768441708447952e3
DATA tanhdata<>+160(SB)/8, $1.12811678491632931402e2
DATA tanhdata<>+168(SB)/8, $1.12811678491632931402e2
DATA tanhdata<>+176(SB)/8, $1.12811678491632931402e2
DATA tanhdata<>+184(SB)/8, $1.12811678491632931402e2
DATA tanhdata<>+192(SB)/8, $2.23548839060100448583e3
DATA tanhdata<>+200(SB)/8, $2.23548839060100448583e3
DATA tanhdata<>+208(SB)/8, $2.23548839060100448583e3
DATA tanhdata<>+216(SB)/8, $2.23548839060100448583e3
DATA tanhdata<>+224(SB)/8, $4.84406305325125486048e3
DATA tanhdata<>+232(SB)/8, $4.84406305325125486048e3
DATA tanhdata<>+240(SB)/8, $4.84406305325125486048e3
DATA tanhdata<>+248(SB)/8, $4.84406305325125486048e3
DATA tanhdata<>+256(SB)/8, $44.014845965556527147994
DATA tanhdata<>+264(SB)/8, $44.014845965556527147994
DATA tanhdata<>+272(SB)/8, $44.014845965556527147994
DATA tanhdata<>+280(SB)/8, $44.014845965556527147994
DATA tanhdata<>+288(SB)/8, $0.625
DATA tanhdata<>+296(SB)/8, $0.625
DATA tanhdata<>+304(SB)/8, $0.625
DATA tanhdata<>+312(SB)/8, $0.625
DATA tanhdata<>+320(SB)/8, $1.4426950408889634073599246810018920
DATA tanhdata<>+328(SB)/8, $1.4426950408889634073599246810018920
DATA tanhdata<>+336(SB)/8, $1.4426950408889634073599246810018920
DATA tanhdata<>+344(SB)/8, $1.4426950408889634073599246810018920
DATA tanhdata<>+352(SB)/8, $0.69314718055966295651160180568695068359375
DATA tanhdata<>+360(SB)/8, $0.69314718055966295651160180568695068359375
DATA tanhdata<>+368(SB)/8, $0.69314718055966295651160180568695068359375
DATA tanhdata<>+376(SB)/8, $0.69314718055966295651160180568695068359375
DATA tanhdata<>+384(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA tanhdata<>+392(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA tanhdata<>+400(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA tanhdata<>+408(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA tanhdata<>+416(SB)/8, $0.0625
DATA tanhdata<>+424(SB)/8, $0.0625
DATA tanhdata<>+432(SB)/8, $0.0625
DATA tanhdata<>+440(SB)/8, $0.0625
DATA tanhdata<>+448(SB)/8, $2.4801587301587301587e-5
DATA tanhdata<>+456(SB)/8, $2.4801587301587301587e-5
DATA tanhdata<>+464(SB)/8, $2.4801587301587301587e-5
DATA tanhdata<>+472(SB)/8, $2.4801587301587301587e-5
DATA tanhdata<>+480(SB)/8, $1.9841269841269841270e-4
DATA tanhdata<>+488(SB)/8, $1.9841269841269841270e-4
DATA tanhdata<>+496(SB)/8, $1.9841269841269841270e-4
DATA tanhdata<>+504(SB)/8, $1.9841269841269841270e-4
DATA tanhdata<>+512(SB)/8, $1.3888888888888888889e-3
DATA tanhdata<>+520(SB)/8, $1.3888888888888888889e-3
DATA tanhdata<>+528(SB)/8, $1.3888888888888888889e-3
DATA tanhdata<>+536(SB)/8, $1.3888888888888888889e-3
DATA tanhdata<>+544(SB)/8, $8.3333333333333333333e-3
DATA tanhdata<>+552(SB)/8, $8.3333333333333333333e-3
DATA tanhdata<>+560(SB)/8, $8.3333333333333333333e-3
DATA tanhdata<>+568(SB)/8, $8.3333333333333333333e-3
DATA tanhdata<>+576(SB)/8, $4.1666666666666666667e-2
DATA tanhdata<>+584(SB)/8, $4.1666666666666666667e-2
DATA tanhdata<>+592(SB)/8, $4.1666666666666666667e-2
DATA tanhdata<>+600(SB)/8, $4.1666666666666666667e-2
DATA tanhdata<>+608(SB)/8, $1.6666666666666666667e-1
DATA tanhdata<>+616(SB)/8, $1.6666666666666666667e-1
DATA tanhdata<>+624(SB)/8, $1.6666666666666666667e-1
DATA tanhdata<>+632(SB)/8, $1.6666666666666666667e-1
DATA tanhdata<>+640(SB)/8, $0.5
DATA tanhdata<>+648(SB)/8, $0.5
DATA tanhdata<>+656(SB)/8, $0.5
DATA tanhdata<>+664(SB)/8, $0.5
DATA tanhdata<>+672(SB)/8, $1.0
DATA tanhdata<>+680(SB)/8, $1.0
DATA tanhdata<>+688(SB)/8, $1.0
DATA tanhdata<>+696(SB)/8, $1.0
DATA tanhdata<>+704(SB)/8, $2.0
DATA tanhdata<>+712(SB)/8, $2.0
DATA tanhdata<>+720(SB)/8, $2.0
DATA tanhdata<>+728(SB)/8, $2.0
DATA tanhdata<>+736(SB)/8, $0x3ff
DATA tanhdata<>+744(SB)/8, $0x3ff
DATA tanhdata<>+752(SB)/8, $0x3ff
DATA tanhdata<>+760(SB)/8, $0x3ff
GLOBL tanhdata<>+0(SB), RODATA, $768

#define T_ABS tanhdata<>+0(SB)
#define T_SIGN tanhdata<>+32(SB)
#define T_P0 tanhdata<>+64(SB)
#define T_P1 tanhdata<>+96(SB)
#define T_P2 tanhdata<>+128(SB)
#define T_Q0 tanhdata<>+160(SB)
#define T_Q1 tanhdata<>+192(SB)
#define T_Q2 tanhdata<>+224(SB)
#define T_HALFMAXLOG tanhdata<>+256(SB)
#define T_C0625 tanhdata<>+288(SB)
#define T_LOG2E tanhdata<>+320(SB)
#define T_LN2U tanhdata<>+352(SB)
#define T_LN2L tanhdata<>+384(SB)
#define T_SIXTEENTH tanhdata<>+416(SB)
#define T_E8 tanhdata<>+448(SB)
#define T_E7 tanhdata<>+480(SB)
#define T_E6 tanhdata<>+512(SB)
#define T_E5 tanhdata<>+544(SB)
#define T_E4 tanhdata<>+576(SB)
#define T_E3 tanhdata<>+608(SB)
#define T_HALF tanhdata<>+640(SB)
#define T_ONE tanhdata<>+672(SB)
#define T_TWO tanhdata<>+704(SB)
#define T_BIAS tanhdata<>+736(SB)

// The four phases of tanh on four lanes, in registers x (the argument),
// z, s, p, n, q and kx (k of TANH2, four int32s); two sets of registers
// are interleaved phase by phase, so that the processor has two
// independent chains of operations to overlap.
//
// TANH1: z = |x|, n = x·s·P(s) and q = Q(s) with s = x² (math.tanh's
// rational function for |x| < 0.625 is x + n/q).
#define TANH1(x, z, s, p, n, q, kx) \
	VANDPD  T_ABS, x, z \
	VMULPD  x, x, s \
	VMULPD  T_P0, s, p \
	VADDPD  T_P1, p, p \
	VMULPD  s, p, p \
	VADDPD  T_P2, p, p \
	VMULPD  s, x, n \
	VMULPD  p, n, n \
	VADDPD  T_Q0, s, q \
	VMULPD  s, q, q \
	VADDPD  T_Q1, q, q \
	VMULPD  s, q, q \
	VADDPD  T_Q2, q, q

// TANH2: s = e^{2z} as math.Exp computes it on processors with FMA:
// 2z = k·ln2 + r (k rounded to nearest), r/16,
// a Taylor polynomial, four squarings as (y+2)·y, times 2^k (k in kx).
#define TANH2(x, z, s, p, n, q, kx) \
	VADDPD  z, z, s \
	VMULPD  T_LOG2E, s, p \
	VCVTPD2DQY p, kx \
	VCVTDQ2PD kx, p \
	VFNMADD231PD T_LN2U, p, s \
	VFNMADD231PD T_LN2L, p, s \
	VMULPD  T_SIXTEENTH, s, s \
	VMOVUPD T_E8, p \
	VFMADD213PD T_E7, s, p \
	VFMADD213PD T_E6, s, p \
	VFMADD213PD T_E5, s, p \
	VFMADD213PD T_E4, s, p \
	VFMADD213PD T_E3, s, p \
	VFMADD213PD T_HALF, s, p \
	VFMADD213PD T_ONE, s, p \
	VMULPD  p, s, s \
	VADDPD  T_TWO, s, p \
	VMULPD  p, s, s \
	VADDPD  T_TWO, s, p \
	VMULPD  p, s, s \
	VADDPD  T_TWO, s, p \
	VMULPD  p, s, s \
	VADDPD  T_TWO, s, p \
	VFMADD213PD T_ONE, p, s \
	VPMOVSXDQ kx, p \
	VPADDQ  T_BIAS, p, p \
	VPSLLQ  $52, p, p \
	VMULPD  p, s, s

// TANH3: one division for both cases: n/q below 0.625, 2/(e+1) above
// (p marks those lanes); then s = x + n/q or ±(1 − 2/(e+1)) with the sign
// of x (in n). Y14 is scratch.
#define TANH3(x, z, s, p, n, q, kx) \
	VCMPPD  $0x1d, T_C0625, z, p \
	VADDPD  T_ONE, s, s \
	VMOVUPD T_TWO, Y14 \
	VBLENDVPD p, Y14, n, n \
	VBLENDVPD p, s, q, q \
	VDIVPD  q, n, n \
	VADDPD  n, x, s \
	VMOVUPD T_ONE, q \
	VSUBPD  n, q, q \
	VANDPD  T_SIGN, x, n \
	VORPD   n, q, q \
	VBLENDVPD p, q, s, s

// TANH4: s = ±1 if |x| > 0.5·MAXLOG, x if x = ±0.
#define TANH4(x, z, s, p, n, q, kx) \
	VCMPPD  $0x1e, T_HALFMAXLOG, z, p \
	VORPD   T_ONE, n, q \
	VBLENDVPD p, q, s, s \
	VXORPD  p, p, p \
	VCMPPD  $0x00, p, x, p \
	VBLENDVPD p, x, s, s

// func tanhAVX(dst, x *float64, n int)
//
// dst[i] = math.Tanh(x[i]) for i < n, n a multiple of 4, eight then four
// at a time: every lane computes the three cases of math.tanh and keeps
// the one it takes.
TEXT ·tanhAVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX

t8:
	CMPQ CX, $8
	JLT  t4
	VMOVUPD (SI), Y0
	VMOVUPD 32(SI), Y7
	TANH1(Y0, Y1, Y2, Y3, Y4, Y5, X6)
	TANH1(Y7, Y8, Y9, Y10, Y11, Y12, X13)
	TANH2(Y0, Y1, Y2, Y3, Y4, Y5, X6)
	TANH2(Y7, Y8, Y9, Y10, Y11, Y12, X13)
	TANH3(Y0, Y1, Y2, Y3, Y4, Y5, X6)
	TANH3(Y7, Y8, Y9, Y10, Y11, Y12, X13)
	TANH4(Y0, Y1, Y2, Y3, Y4, Y5, X6)
	TANH4(Y7, Y8, Y9, Y10, Y11, Y12, X13)
	VMOVUPD Y2, (DI)
	VMOVUPD Y9, 32(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $8, CX
	JMP  t8

t4:
	CMPQ CX, $4
	JLT  tdone
	VMOVUPD (SI), Y0
	TANH1(Y0, Y1, Y2, Y3, Y4, Y5, X6)
	TANH2(Y0, Y1, Y2, Y3, Y4, Y5, X6)
	TANH3(Y0, Y1, Y2, Y3, Y4, Y5, X6)
	TANH4(Y0, Y1, Y2, Y3, Y4, Y5, X6)
	VMOVUPD Y2, (DI)

tdone:
	VZEROUPPER
	RET
