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
// nt terms (CX), m lanes (DX). Lanes go eight, then four, then one at a
// time (AX); R12, R13, R14 walk the coefficients, the vectors and the
// count of terms.
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
	VMOVUPD (R8)(AX*8), Y0 \
	VMOVUPD 32(R8)(AX*8), Y1 \
	VMOVUPD (R9)(AX*8), Y2 \
	VMOVUPD 32(R9)(AX*8), Y3 \
	VMOVUPD (R10)(AX*8), Y4 \
	VMOVUPD 32(R10)(AX*8), Y5 \
	VMOVUPD (R11)(AX*8), Y6 \
	VMOVUPD 32(R11)(AX*8), Y7 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
t8: \
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
	JNE  t8 \
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
	VMOVUPD (R8)(AX*8), Y0 \
	VMOVUPD (R9)(AX*8), Y2 \
	VMOVUPD (R10)(AX*8), Y4 \
	VMOVUPD (R11)(AX*8), Y6 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
t4: \
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
	JNE  t4 \
	VMOVUPD Y0, (R8)(AX*8) \
	VMOVUPD Y2, (R9)(AX*8) \
	VMOVUPD Y4, (R10)(AX*8) \
	VMOVUPD Y6, (R11)(AX*8) \
	ADDQ $4, AX \
l1: \
	CMPQ AX, DX \
	JGE  done \
	VMOVSD (R8)(AX*8), X0 \
	VMOVSD (R9)(AX*8), X2 \
	VMOVSD (R10)(AX*8), X4 \
	VMOVSD (R11)(AX*8), X6 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
t1: \
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
	JNE  t1 \
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
// c (SI, one a term), vectors vec (DI), nt terms (CX), m lanes (DX);
// lanes sixteen, then four, then one at a time.
#define ROWS1(OPY, OPX) \
	MOVQ d+0(FP), R8 \
	MOVQ c+8(FP), SI \
	MOVQ vec+16(FP), DI \
	MOVQ nt+24(FP), CX \
	MOVQ m+32(FP), DX \
	XORQ AX, AX \
l16: \
	LEAQ 16(AX), BX \
	CMPQ BX, DX \
	JGT  l4 \
	VMOVUPD (R8)(AX*8), Y0 \
	VMOVUPD 32(R8)(AX*8), Y1 \
	VMOVUPD 64(R8)(AX*8), Y2 \
	VMOVUPD 96(R8)(AX*8), Y3 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
t16: \
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
	JNE  t16 \
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
	VMOVUPD (R8)(AX*8), Y0 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
t4: \
	MOVQ (R13), BX \
	VBROADCASTSD (R12), Y10 \
	VMOVUPD (BX)(AX*8), Y4 \
	OPY(Y10, Y4, Y0) \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JNE  t4 \
	VMOVUPD Y0, (R8)(AX*8) \
	ADDQ $4, AX \
	JMP  l4 \
l1: \
	CMPQ AX, DX \
	JGE  done \
	VMOVSD (R8)(AX*8), X0 \
	MOVQ SI, R12 \
	MOVQ DI, R13 \
	MOVQ CX, R14 \
t1: \
	MOVQ (R13), BX \
	VMOVSD (R12), X10 \
	VMOVSD (BX)(AX*8), X4 \
	OPX(X10, X4, X0) \
	ADDQ $8, R12 \
	ADDQ $24, R13 \
	DECQ R14 \
	JNE  t1 \
	VMOVSD X0, (R8)(AX*8) \
	INCQ AX \
	JMP  l1 \
done: \
	VZEROUPPER \
	RET

// func fma4AVX(d0, d1, d2, d3, c *float64, vec *[]float64, nt, m int)
TEXT ·fma4AVX(SB), NOSPLIT, $0-64
	ROWS4(FMAY, FMAX)

// func mad4AVX(d0, d1, d2, d3, c *float64, vec *[]float64, nt, m int)
TEXT ·mad4AVX(SB), NOSPLIT, $0-64
	ROWS4(MADY, MADX)

// func fma1AVX(d, c *float64, vec *[]float64, nt, m int)
TEXT ·fma1AVX(SB), NOSPLIT, $0-40
	ROWS1(FMAY, FMAX)

// func mad1AVX(d, c *float64, vec *[]float64, nt, m int)
TEXT ·mad1AVX(SB), NOSPLIT, $0-40
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
// product, bit 1 subtracted); nterms the number of terms of each entry.
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
	MOVQ (R12), BX
	VMOVUPD (BX)(AX*8), Y0
	VMOVUPD 32(BX)(AX*8), Y1
	VMOVUPD 64(BX)(AX*8), Y2
	VMOVUPD 96(BX)(AX*8), Y3
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   f16
	MOVQ  (R12), BX
	VMULPD (BX)(AX*8), Y0, Y0
	VMULPD 32(BX)(AX*8), Y1, Y1
	VMULPD 64(BX)(AX*8), Y2, Y2
	VMULPD 96(BX)(AX*8), Y3, Y3
	ADDQ  $24, R12
f16:
	INCQ R13
	DECQ R14
	JEQ  s16
t16:
	MOVQ (R12), BX
	VMOVUPD (BX)(AX*8), Y4
	VMOVUPD 32(BX)(AX*8), Y5
	VMOVUPD 64(BX)(AX*8), Y6
	VMOVUPD 96(BX)(AX*8), Y7
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   v16
	MOVQ  (R12), BX
	VMULPD (BX)(AX*8), Y4, Y4
	VMULPD 32(BX)(AX*8), Y5, Y5
	VMULPD 64(BX)(AX*8), Y6, Y6
	VMULPD 96(BX)(AX*8), Y7, Y7
	ADDQ  $24, R12
v16:
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
	MOVQ (R12), BX
	VMOVUPD (BX)(AX*8), Y0
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   f4
	MOVQ  (R12), BX
	VMULPD (BX)(AX*8), Y0, Y0
	ADDQ  $24, R12
f4:
	INCQ R13
	DECQ R14
	JEQ  s4
t4:
	MOVQ (R12), BX
	VMOVUPD (BX)(AX*8), Y4
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   v4
	MOVQ  (R12), BX
	VMULPD (BX)(AX*8), Y4, Y4
	ADDQ  $24, R12
v4:
	TESTB $2, (R13)
	JNE   n4
	VADDPD Y4, Y0, Y0
	JMP   e4
n4:
	VSUBPD Y4, Y0, Y0
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
	MOVQ (R12), BX
	VMOVSD (BX)(AX*8), X0
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   f1
	MOVQ  (R12), BX
	VMULSD (BX)(AX*8), X0, X0
	ADDQ  $24, R12
f1:
	INCQ R13
	DECQ R14
	JEQ  s1
t1:
	MOVQ (R12), BX
	VMOVSD (BX)(AX*8), X4
	ADDQ  $24, R12
	TESTB $1, (R13)
	JEQ   v1
	MOVQ  (R12), BX
	VMULSD (BX)(AX*8), X4, X4
	ADDQ  $24, R12
v1:
	TESTB $2, (R13)
	JNE   n1
	VADDSD X4, X0, X0
	JMP   e1
n1:
	VSUBSD X4, X0, X0
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
