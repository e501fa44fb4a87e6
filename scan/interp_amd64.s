//go:build !purego

#include "textflag.h"

// func interpTimesAVX(dst, y, w, ts *float64, nt int, t, h float64, d, m int)
//
// InterpTimes' kernel: for each of the nt save times, θ = (ts[k] − t)/h,
// then the Horner sum of every component, four at a time (the rest one
// at a time), VMULPD then VADDPD (the rounded product, then the sum) as
// Interp computes it. Four save times at a time, their chains side by
// side (each term's coefficients loaded once for the four: the chains'
// latencies overlap), then the rest one at a time.
TEXT ·interpTimesAVX(SB), NOSPLIT, $0-72
	MOVQ   dst+0(FP), DI
	MOVQ   y+8(FP), R8
	MOVQ   w+16(FP), R9
	MOVQ   ts+24(FP), R10
	MOVQ   nt+32(FP), CX
	VMOVSD t+40(FP), X14
	VMOVSD h+48(FP), X15
	MOVQ   d+56(FP), R13
	SHLQ   $3, R13            // one term's bytes
	MOVQ   m+64(FP), R12
	MOVQ   R12, R14
	DECQ   R14
	IMULQ  R13, R14           // the last term's offset
	ADDQ   R9, R14            // the last term
	VBROADCASTSD X14, Y12     // t, four times
	VBROADCASTSD X15, Y13     // h, four times

quads:
	CMPQ         CX, $4
	JLT          saves
	VMOVUPD      (R10), Y3
	VSUBPD       Y12, Y3, Y3
	VDIVPD       Y13, Y3, Y3  // the four θ, one division each as below
	VPERMPD      $0x00, Y3, Y0
	VPERMPD      $0x55, Y3, Y1
	VPERMPD      $0xaa, Y3, Y2
	VPERMPD      $0xff, Y3, Y3
	XORQ         BX, BX       // the component's offset in bytes

qblocks:
	LEAQ    32(BX), AX
	CMPQ    AX, R13
	JGT     qtail
	MOVQ    R14, SI
	VMOVUPD (SI)(BX*1), Y4
	VMOVAPD Y4, Y5
	VMOVAPD Y4, Y6
	VMOVAPD Y4, Y7
	MOVQ    R12, DX
	DECQ    DX

qterms:
	TESTQ   DX, DX
	JEQ     qbdone
	SUBQ    R13, SI
	VMOVUPD (SI)(BX*1), Y8
	VMULPD  Y0, Y4, Y4
	VMULPD  Y1, Y5, Y5
	VMULPD  Y2, Y6, Y6
	VMULPD  Y3, Y7, Y7
	VADDPD  Y8, Y4, Y4
	VADDPD  Y8, Y5, Y5
	VADDPD  Y8, Y6, Y6
	VADDPD  Y8, Y7, Y7
	DECQ    DX
	JMP     qterms

qbdone:
	VMOVUPD (R8)(BX*1), Y8
	VMULPD  Y0, Y4, Y4
	VMULPD  Y1, Y5, Y5
	VMULPD  Y2, Y6, Y6
	VMULPD  Y3, Y7, Y7
	VADDPD  Y8, Y4, Y4
	VADDPD  Y8, Y5, Y5
	VADDPD  Y8, Y6, Y6
	VADDPD  Y8, Y7, Y7
	MOVQ    DI, AX
	VMOVUPD Y4, (AX)(BX*1)
	ADDQ    R13, AX
	VMOVUPD Y5, (AX)(BX*1)
	ADDQ    R13, AX
	VMOVUPD Y6, (AX)(BX*1)
	ADDQ    R13, AX
	VMOVUPD Y7, (AX)(BX*1)
	ADDQ    $32, BX
	JMP     qblocks

qtail:
	CMPQ   BX, R13
	JGE    qnext
	MOVQ   R14, SI
	VMOVSD (SI)(BX*1), X4
	VMOVAPD X4, X5
	VMOVAPD X4, X6
	VMOVAPD X4, X7
	MOVQ   R12, DX
	DECQ   DX

qtterms:
	TESTQ  DX, DX
	JEQ    qtdone
	SUBQ   R13, SI
	VMOVSD (SI)(BX*1), X8
	VMULSD X0, X4, X4
	VMULSD X1, X5, X5
	VMULSD X2, X6, X6
	VMULSD X3, X7, X7
	VADDSD X8, X4, X4
	VADDSD X8, X5, X5
	VADDSD X8, X6, X6
	VADDSD X8, X7, X7
	DECQ   DX
	JMP    qtterms

qtdone:
	VMOVSD (R8)(BX*1), X8
	VMULSD X0, X4, X4
	VMULSD X1, X5, X5
	VMULSD X2, X6, X6
	VMULSD X3, X7, X7
	VADDSD X8, X4, X4
	VADDSD X8, X5, X5
	VADDSD X8, X6, X6
	VADDSD X8, X7, X7
	MOVQ   DI, AX
	VMOVSD X4, (AX)(BX*1)
	ADDQ   R13, AX
	VMOVSD X5, (AX)(BX*1)
	ADDQ   R13, AX
	VMOVSD X6, (AX)(BX*1)
	ADDQ   R13, AX
	VMOVSD X7, (AX)(BX*1)
	ADDQ   $8, BX
	JMP    qtail

qnext:
	LEAQ (DI)(R13*4), DI
	ADDQ $32, R10
	SUBQ $4, CX
	JMP  quads

saves:
	TESTQ        CX, CX
	JEQ          done
	VMOVSD       (R10), X0
	VSUBSD       X14, X0, X0
	VDIVSD       X15, X0, X0  // θ
	VBROADCASTSD X0, Y0
	XORQ         BX, BX       // the component's offset in bytes

blocks:
	LEAQ    32(BX), AX
	CMPQ    AX, R13
	JGT     tail
	MOVQ    R14, SI
	VMOVUPD (SI)(BX*1), Y1
	MOVQ    R12, DX
	DECQ    DX

bterms:
	TESTQ  DX, DX
	JEQ    bdone
	SUBQ   R13, SI
	VMULPD Y0, Y1, Y1
	VADDPD (SI)(BX*1), Y1, Y1
	DECQ   DX
	JMP    bterms

bdone:
	VMULPD  Y0, Y1, Y1
	VADDPD  (R8)(BX*1), Y1, Y1
	VMOVUPD Y1, (DI)(BX*1)
	ADDQ    $32, BX
	JMP     blocks

tail:
	CMPQ   BX, R13
	JGE    next
	MOVQ   R14, SI
	VMOVSD (SI)(BX*1), X1
	MOVQ   R12, DX
	DECQ   DX

tterms:
	TESTQ  DX, DX
	JEQ    tdone
	SUBQ   R13, SI
	VMULSD X0, X1, X1
	VADDSD (SI)(BX*1), X1, X1
	DECQ   DX
	JMP    tterms

tdone:
	VMULSD X0, X1, X1
	VADDSD (R8)(BX*1), X1, X1
	VMOVSD X1, (DI)(BX*1)
	ADDQ   $8, BX
	JMP    tail

next:
	ADDQ R13, DI
	ADDQ $8, R10
	DECQ CX
	JMP  saves

done:
	VZEROUPPER
	RET

// func addPowersAVX(lane, gs, ts *float64, ns int, t, h float64, d, m int)
//
// addPowersTimes' kernel: for each of the ns save times, θ = (ts[k] −
// t)/h and lane[(j−1)·d + c] += θ^j·g[k·d + c] for j = 1…m (θ^j by
// repeated multiplication), four components at a time (the rest one at
// a time), VMULPD then VADDPD as addPowers computes it.
TEXT ·addPowersAVX(SB), NOSPLIT, $0-64
	MOVQ   lane+0(FP), DI
	MOVQ   gs+8(FP), R8
	MOVQ   ts+16(FP), R10
	MOVQ   ns+24(FP), CX
	VMOVSD t+32(FP), X14
	VMOVSD h+40(FP), X15
	MOVQ   d+48(FP), R13
	SHLQ   $3, R13            // one term's bytes
	MOVQ   m+56(FP), R12

	// Four components and at most eight terms: the sums in registers
	// (Y5…Y12) across the save times, each in the same order as below.
	CMPQ R13, $32
	JNE  psaves
	CMPQ R12, $8
	JGT  psaves
	VMOVUPD (DI), Y5
	CMPQ    R12, $2
	JLT     floaded
	VMOVUPD 32(DI), Y6
	CMPQ    R12, $3
	JLT     floaded
	VMOVUPD 64(DI), Y7
	CMPQ    R12, $4
	JLT     floaded
	VMOVUPD 96(DI), Y8
	CMPQ    R12, $5
	JLT     floaded
	VMOVUPD 128(DI), Y9
	CMPQ    R12, $6
	JLT     floaded
	VMOVUPD 160(DI), Y10
	CMPQ    R12, $7
	JLT     floaded
	VMOVUPD 192(DI), Y11
	CMPQ    R12, $8
	JLT     floaded
	VMOVUPD 224(DI), Y12

floaded:
	TESTQ        CX, CX
	JEQ          fstore
	VMOVSD       (R10), X0
	VSUBSD       X14, X0, X0
	VDIVSD       X15, X0, X0  // θ
	VMOVAPD      X0, X2       // θ^j, from j = 1
	VMOVUPD      (R8), Y1     // the save's cotangent
	VBROADCASTSD X2, Y3
	VMULPD       Y1, Y3, Y4
	VADDPD       Y5, Y4, Y5
	CMPQ         R12, $2
	JLT          fnext
	VMULSD       X0, X2, X2
	VBROADCASTSD X2, Y3
	VMULPD       Y1, Y3, Y4
	VADDPD       Y6, Y4, Y6
	CMPQ         R12, $3
	JLT          fnext
	VMULSD       X0, X2, X2
	VBROADCASTSD X2, Y3
	VMULPD       Y1, Y3, Y4
	VADDPD       Y7, Y4, Y7
	CMPQ         R12, $4
	JLT          fnext
	VMULSD       X0, X2, X2
	VBROADCASTSD X2, Y3
	VMULPD       Y1, Y3, Y4
	VADDPD       Y8, Y4, Y8
	CMPQ         R12, $5
	JLT          fnext
	VMULSD       X0, X2, X2
	VBROADCASTSD X2, Y3
	VMULPD       Y1, Y3, Y4
	VADDPD       Y9, Y4, Y9
	CMPQ         R12, $6
	JLT          fnext
	VMULSD       X0, X2, X2
	VBROADCASTSD X2, Y3
	VMULPD       Y1, Y3, Y4
	VADDPD       Y10, Y4, Y10
	CMPQ         R12, $7
	JLT          fnext
	VMULSD       X0, X2, X2
	VBROADCASTSD X2, Y3
	VMULPD       Y1, Y3, Y4
	VADDPD       Y11, Y4, Y11
	CMPQ         R12, $8
	JLT          fnext
	VMULSD       X0, X2, X2
	VBROADCASTSD X2, Y3
	VMULPD       Y1, Y3, Y4
	VADDPD       Y12, Y4, Y12

fnext:
	ADDQ $32, R8
	ADDQ $8, R10
	DECQ CX
	JMP  floaded

fstore:
	VMOVUPD Y5, (DI)
	CMPQ    R12, $2
	JLT     pdone
	VMOVUPD Y6, 32(DI)
	CMPQ    R12, $3
	JLT     pdone
	VMOVUPD Y7, 64(DI)
	CMPQ    R12, $4
	JLT     pdone
	VMOVUPD Y8, 96(DI)
	CMPQ    R12, $5
	JLT     pdone
	VMOVUPD Y9, 128(DI)
	CMPQ    R12, $6
	JLT     pdone
	VMOVUPD Y10, 160(DI)
	CMPQ    R12, $7
	JLT     pdone
	VMOVUPD Y11, 192(DI)
	CMPQ    R12, $8
	JLT     pdone
	VMOVUPD Y12, 224(DI)
	JMP     pdone

psaves:
	TESTQ   CX, CX
	JEQ     pdone
	VMOVSD  (R10), X0
	VSUBSD  X14, X0, X0
	VDIVSD  X15, X0, X0       // θ
	VMOVAPD X0, X2            // θ^j, from j = 1
	MOVQ    DI, SI
	MOVQ    R12, DX

pterms:
	VBROADCASTSD X2, Y3
	XORQ         BX, BX

pblocks:
	LEAQ    32(BX), AX
	CMPQ    AX, R13
	JGT     ptail
	VMULPD  (R8)(BX*1), Y3, Y4
	VADDPD  (SI)(BX*1), Y4, Y4
	VMOVUPD Y4, (SI)(BX*1)
	ADDQ    $32, BX
	JMP     pblocks

ptail:
	CMPQ   BX, R13
	JGE    pnext
	VMULSD (R8)(BX*1), X3, X4
	VADDSD (SI)(BX*1), X4, X4
	VMOVSD X4, (SI)(BX*1)
	ADDQ   $8, BX
	JMP    ptail

pnext:
	VMULSD X0, X2, X2
	ADDQ   R13, SI
	DECQ   DX
	JNZ    pterms
	ADDQ   R13, R8
	ADDQ   $8, R10
	DECQ   CX
	JMP    psaves

pdone:
	VZEROUPPER
	RET
