//go:build !purego

#include "textflag.h"

// The transposes of scatterRows: a launch's consecutive trajectories'
// components, w columns of the device's component-major arrays, into
// the caller's rows of w values (row j at dst[j·w:(j+1)·w]), four
// trajectories a round: the columns' four values loaded as vectors,
// rearranged (VPERMPD, VBLENDPD; VUNPCKLPD/VUNPCKHPD, VPERM2F128) into
// w stores of four consecutive values of dst, and added to a vector of
// sums per column (the finite check: sumFinite). Copies only: dst gets
// the columns' bits. n is the trajectories, a multiple of 4 (the caller
// copies the rest); sums gets the four lanes' sums of all the columns.

// func rows2AVX(dst, c0, c1 *float64, n int, sums *[4]float64)
TEXT ·rows2AVX(SB), NOSPLIT, $0-40
	MOVQ   dst+0(FP), DI
	MOVQ   c0+8(FP), R8
	MOVQ   c1+16(FP), R9
	MOVQ   n+24(FP), CX
	MOVQ   sums+32(FP), DX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	XORQ   AX, AX          // the trajectories' byte offset in the columns
	SHRQ   $2, CX
	JEQ    r2done

r2loop:
	VMOVUPD    (R8)(AX*1), Y0    // a0 a1 a2 a3
	VMOVUPD    (R9)(AX*1), Y1    // b0 b1 b2 b3
	VADDPD     Y0, Y8, Y8
	VADDPD     Y1, Y9, Y9
	VUNPCKLPD  Y1, Y0, Y2        // a0 b0 a2 b2
	VUNPCKHPD  Y1, Y0, Y3        // a1 b1 a3 b3
	VPERM2F128 $0x20, Y3, Y2, Y4 // a0 b0 a1 b1
	VPERM2F128 $0x31, Y3, Y2, Y5 // a2 b2 a3 b3
	VMOVUPD    Y4, (DI)
	VMOVUPD    Y5, 32(DI)
	ADDQ       $32, AX
	ADDQ       $64, DI
	DECQ       CX
	JNZ        r2loop

r2done:
	VADDPD     Y9, Y8, Y8
	VMOVUPD    Y8, (DX)
	VZEROUPPER
	RET

// func rows3AVX(dst, c0, c1, c2 *float64, n int, sums *[4]float64)
//
// Columns a, b, e: one permute each puts every value where one of the
// three stores wants it (a0 a3 a2 a1, b1 b0 b3 b2, e2 e1 e0 e3), two
// blends a store pick the other columns' values:
// a0 b0 e0 a1 | b1 e1 a2 b2 | e2 a3 b3 e3.
TEXT ·rows3AVX(SB), NOSPLIT, $0-48
	MOVQ   dst+0(FP), DI
	MOVQ   c0+8(FP), R8
	MOVQ   c1+16(FP), R9
	MOVQ   c2+24(FP), R10
	MOVQ   n+32(FP), CX
	MOVQ   sums+40(FP), DX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	XORQ   AX, AX
	SHRQ   $2, CX
	JEQ    r3done

r3loop:
	VMOVUPD  (R8)(AX*1), Y0
	VMOVUPD  (R9)(AX*1), Y1
	VMOVUPD  (R10)(AX*1), Y2
	VADDPD   Y0, Y8, Y8
	VADDPD   Y1, Y9, Y9
	VADDPD   Y2, Y10, Y10
	VPERMPD  $0x6c, Y0, Y3     // a0 a3 a2 a1
	VPERMPD  $0xb1, Y1, Y4     // b1 b0 b3 b2
	VPERMPD  $0xc6, Y2, Y5     // e2 e1 e0 e3
	VBLENDPD $0x2, Y4, Y3, Y6  // a0 b0 a2 a1
	VBLENDPD $0x4, Y5, Y6, Y6  // a0 b0 e0 a1
	VBLENDPD $0x2, Y5, Y4, Y7  // b1 e1 b3 b2
	VBLENDPD $0x4, Y3, Y7, Y7  // b1 e1 a2 b2
	VBLENDPD $0x2, Y3, Y5, Y11 // e2 a3 e0 e3
	VBLENDPD $0x4, Y4, Y11, Y11 // e2 a3 b3 e3
	VMOVUPD  Y6, (DI)
	VMOVUPD  Y7, 32(DI)
	VMOVUPD  Y11, 64(DI)
	ADDQ     $32, AX
	ADDQ     $96, DI
	DECQ     CX
	JNZ      r3loop

r3done:
	VADDPD   Y9, Y8, Y8
	VADDPD   Y10, Y8, Y8
	VMOVUPD  Y8, (DX)
	VZEROUPPER
	RET

// func rows4AVX(dst, c0, c1, c2, c3 *float64, n int, sums *[4]float64)
TEXT ·rows4AVX(SB), NOSPLIT, $0-56
	MOVQ   dst+0(FP), DI
	MOVQ   c0+8(FP), R8
	MOVQ   c1+16(FP), R9
	MOVQ   c2+24(FP), R10
	MOVQ   c3+32(FP), R11
	MOVQ   n+40(FP), CX
	MOVQ   sums+48(FP), DX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	XORQ   AX, AX
	SHRQ   $2, CX
	JEQ    r4done

r4loop:
	VMOVUPD    (R8)(AX*1), Y0
	VMOVUPD    (R9)(AX*1), Y1
	VMOVUPD    (R10)(AX*1), Y2
	VMOVUPD    (R11)(AX*1), Y3
	VADDPD     Y0, Y8, Y8
	VADDPD     Y1, Y9, Y9
	VADDPD     Y2, Y10, Y10
	VADDPD     Y3, Y11, Y11
	VUNPCKLPD  Y1, Y0, Y4        // a0 b0 a2 b2
	VUNPCKHPD  Y1, Y0, Y5        // a1 b1 a3 b3
	VUNPCKLPD  Y3, Y2, Y6        // e0 f0 e2 f2
	VUNPCKHPD  Y3, Y2, Y7        // e1 f1 e3 f3
	VPERM2F128 $0x20, Y6, Y4, Y0 // a0 b0 e0 f0
	VPERM2F128 $0x20, Y7, Y5, Y1 // a1 b1 e1 f1
	VPERM2F128 $0x31, Y6, Y4, Y2 // a2 b2 e2 f2
	VPERM2F128 $0x31, Y7, Y5, Y3 // a3 b3 e3 f3
	VMOVUPD    Y0, (DI)
	VMOVUPD    Y1, 32(DI)
	VMOVUPD    Y2, 64(DI)
	VMOVUPD    Y3, 96(DI)
	ADDQ       $32, AX
	SUBQ       $-128, DI
	DECQ       CX
	JNZ        r4loop

r4done:
	VADDPD     Y9, Y8, Y8
	VADDPD     Y11, Y10, Y10
	VADDPD     Y10, Y8, Y8
	VMOVUPD    Y8, (DX)
	VZEROUPPER
	RET

// The status strips' widening copies (scatterStatusStrip): the device's
// int32 counts of n trajectories (a multiple of 4) into the caller's
// int arrays, four a round (VPMOVSXDQ: each value's sign extended, as
// Go's int(x)).

// func countsAVX(accepted, lens *int, acc *int32, n int) (longest int32)
//
// stripCounts: accepted[j] = int(acc[j]), and lens[j] too unless lens is
// nil; the most of acc (VPMAXSD: the signed maximum of each lane, then
// of the four lanes), or 0 if every value is below it.
TEXT ·countsAVX(SB), NOSPLIT, $0-36
	MOVQ      accepted+0(FP), DI
	MOVQ      lens+8(FP), SI
	MOVQ      acc+16(FP), R8
	MOVQ      n+24(FP), CX
	VPXOR     X8, X8, X8        // the lanes' maxima, from 0
	XORQ      AX, AX            // the int32s' byte offset
	SHRQ      $2, CX
	JEQ       cdone
	TESTQ     SI, SI
	JEQ       cnolens

cloop:
	VMOVDQU   (R8)(AX*1), X0
	VPMAXSD   X0, X8, X8
	VPMOVSXDQ X0, Y1
	VMOVDQU   Y1, (DI)(AX*2)
	VMOVDQU   Y1, (SI)(AX*2)
	ADDQ      $16, AX
	DECQ      CX
	JNZ       cloop
	JMP       cdone

cnolens:
	VMOVDQU   (R8)(AX*1), X0
	VPMAXSD   X0, X8, X8
	VPMOVSXDQ X0, Y1
	VMOVDQU   Y1, (DI)(AX*2)
	ADDQ      $16, AX
	DECQ      CX
	JNZ       cnolens

cdone:
	VPSHUFD   $0x4e, X8, X0     // lanes 2 3 0 1
	VPMAXSD   X0, X8, X8
	VPSHUFD   $0xb1, X8, X0     // lanes 1 0 3 2
	VPMAXSD   X0, X8, X8
	VMOVD     X8, AX
	MOVL      AX, longest+32(FP)
	VZEROUPPER
	RET

// func rejectedAVX(rejected, evals, accepted *int, rej *int32, n, e0, e1 int)
//
// stripRejected: rejected[j] = int(rej[j]) and evals[j] = e0 +
// e1·(accepted[j] + rejected[j]) in Go's int arithmetic (modulo 2^64):
// the product from two VPMULUDQs, e1 times the low and the high 32 bits
// of each sum (e1 < 2^32: the caller checks).
TEXT ·rejectedAVX(SB), NOSPLIT, $0-56
	MOVQ         rejected+0(FP), DI
	MOVQ         evals+8(FP), SI
	MOVQ         accepted+16(FP), R9
	MOVQ         rej+24(FP), R8
	MOVQ         n+32(FP), CX
	VPBROADCASTQ e0+40(FP), Y14
	VPBROADCASTQ e1+48(FP), Y15
	XORQ         AX, AX
	SHRQ         $2, CX
	JEQ          rdone

rloop:
	VPMOVSXDQ    (R8)(AX*1), Y0     // x
	VMOVDQU      Y0, (DI)(AX*2)
	VPADDQ       (R9)(AX*2), Y0, Y1 // s = a + x
	VPSRLQ       $32, Y1, Y2
	VPMULUDQ     Y15, Y1, Y1        // e1 · low(s)
	VPMULUDQ     Y15, Y2, Y2        // e1 · high(s)
	VPSLLQ       $32, Y2, Y2
	VPADDQ       Y2, Y1, Y1
	VPADDQ       Y14, Y1, Y1
	VMOVDQU      Y1, (SI)(AX*2)
	ADDQ         $16, AX
	DECQ         CX
	JNZ          rloop

rdone:
	VZEROUPPER
	RET

// func orAVX(x *int32, n int) int32
//
// orInt32: the n values (a multiple of 16) of x OR-ed together, sixteen a
// round in two vectors.
TEXT ·orAVX(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	SHRQ    $4, CX
	JEQ     odone

oloop:
	VPOR    (SI), Y0, Y0
	VPOR    32(SI), Y1, Y1
	ADDQ    $64, SI
	DECQ    CX
	JNZ     oloop

odone:
	VPOR         Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPOR         X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPOR         X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPOR         X1, X0, X0
	VMOVD        X0, AX
	MOVL         AX, ret+16(FP)
	VZEROUPPER
	RET

// The transposes of gatherRows, the other way: n consecutive rows of w
// values (n a multiple of 4) into w columns of the device's
// component-major arrays, four rows a round (the kernels above, their
// permutations undone), with the sums of every value in sums' lanes.

// func cols2AVX(c0, c1, src *float64, n int, sums *[4]float64)
TEXT ·cols2AVX(SB), NOSPLIT, $0-40
	MOVQ   c0+0(FP), R8
	MOVQ   c1+8(FP), R9
	MOVQ   src+16(FP), SI
	MOVQ   n+24(FP), CX
	MOVQ   sums+32(FP), DX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	XORQ   AX, AX
	SHRQ   $2, CX
	JEQ    g2done

g2loop:
	VMOVUPD    (SI), Y0          // a0 b0 a1 b1
	VMOVUPD    32(SI), Y1        // a2 b2 a3 b3
	VPERM2F128 $0x20, Y1, Y0, Y2 // a0 b0 a2 b2
	VPERM2F128 $0x31, Y1, Y0, Y3 // a1 b1 a3 b3
	VUNPCKLPD  Y3, Y2, Y4        // a0 a1 a2 a3
	VUNPCKHPD  Y3, Y2, Y5        // b0 b1 b2 b3
	VADDPD     Y4, Y8, Y8
	VADDPD     Y5, Y9, Y9
	VMOVUPD    Y4, (R8)(AX*1)
	VMOVUPD    Y5, (R9)(AX*1)
	ADDQ       $32, AX
	ADDQ       $64, SI
	DECQ       CX
	JNZ        g2loop

g2done:
	VADDPD  Y9, Y8, Y8
	VMOVUPD Y8, (DX)
	VZEROUPPER
	RET

// func cols3AVX(c0, c1, c2, src *float64, n int, sums *[4]float64)
//
// Rows a0 b0 e0 a1 | b1 e1 a2 b2 | e2 a3 b3 e3: blends gather each
// column's values in rows3AVX's permuted order (a0 a3 a2 a1, b1 b0 b3 b2,
// e2 e1 e0 e3), whose permutations are their own inverses.
TEXT ·cols3AVX(SB), NOSPLIT, $0-48
	MOVQ   c0+0(FP), R8
	MOVQ   c1+8(FP), R9
	MOVQ   c2+16(FP), R10
	MOVQ   src+24(FP), SI
	MOVQ   n+32(FP), CX
	MOVQ   sums+40(FP), DX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	XORQ   AX, AX
	SHRQ   $2, CX
	JEQ    g3done

g3loop:
	VMOVUPD  (SI), Y0           // r0: a0 b0 e0 a1
	VMOVUPD  32(SI), Y1         // r1: b1 e1 a2 b2
	VMOVUPD  64(SI), Y2         // r2: e2 a3 b3 e3
	VBLENDPD $0x2, Y2, Y0, Y3   // a0 a3 e0 a1
	VBLENDPD $0x4, Y1, Y3, Y3   // a0 a3 a2 a1
	VBLENDPD $0x2, Y0, Y1, Y4   // b1 b0 a2 b2
	VBLENDPD $0x4, Y2, Y4, Y4   // b1 b0 b3 b2
	VBLENDPD $0x2, Y1, Y2, Y5   // e2 e1 b3 e3
	VBLENDPD $0x4, Y0, Y5, Y5   // e2 e1 e0 e3
	VPERMPD  $0x6c, Y3, Y3      // a0 a1 a2 a3
	VPERMPD  $0xb1, Y4, Y4      // b0 b1 b2 b3
	VPERMPD  $0xc6, Y5, Y5      // e0 e1 e2 e3
	VADDPD   Y3, Y8, Y8
	VADDPD   Y4, Y9, Y9
	VADDPD   Y5, Y10, Y10
	VMOVUPD  Y3, (R8)(AX*1)
	VMOVUPD  Y4, (R9)(AX*1)
	VMOVUPD  Y5, (R10)(AX*1)
	ADDQ     $32, AX
	ADDQ     $96, SI
	DECQ     CX
	JNZ      g3loop

g3done:
	VADDPD  Y9, Y8, Y8
	VADDPD  Y10, Y8, Y8
	VMOVUPD Y8, (DX)
	VZEROUPPER
	RET

// func cols4AVX(c0, c1, c2, c3, src *float64, n int, sums *[4]float64)
TEXT ·cols4AVX(SB), NOSPLIT, $0-56
	MOVQ   c0+0(FP), R8
	MOVQ   c1+8(FP), R9
	MOVQ   c2+16(FP), R10
	MOVQ   c3+24(FP), R11
	MOVQ   src+32(FP), SI
	MOVQ   n+40(FP), CX
	MOVQ   sums+48(FP), DX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	XORQ   AX, AX
	SHRQ   $2, CX
	JEQ    g4done

g4loop:
	VMOVUPD    (SI), Y0          // row 0: a0 b0 e0 f0
	VMOVUPD    32(SI), Y1
	VMOVUPD    64(SI), Y2
	VMOVUPD    96(SI), Y3
	VUNPCKLPD  Y1, Y0, Y4        // a0 a1 e0 e1
	VUNPCKHPD  Y1, Y0, Y5        // b0 b1 f0 f1
	VUNPCKLPD  Y3, Y2, Y6        // a2 a3 e2 e3
	VUNPCKHPD  Y3, Y2, Y7        // b2 b3 f2 f3
	VPERM2F128 $0x20, Y6, Y4, Y0 // a0 a1 a2 a3
	VPERM2F128 $0x20, Y7, Y5, Y1 // b0 b1 b2 b3
	VPERM2F128 $0x31, Y6, Y4, Y2 // e0 e1 e2 e3
	VPERM2F128 $0x31, Y7, Y5, Y3 // f0 f1 f2 f3
	VADDPD     Y0, Y8, Y8
	VADDPD     Y1, Y9, Y9
	VADDPD     Y2, Y10, Y10
	VADDPD     Y3, Y11, Y11
	VMOVUPD    Y0, (R8)(AX*1)
	VMOVUPD    Y1, (R9)(AX*1)
	VMOVUPD    Y2, (R10)(AX*1)
	VMOVUPD    Y3, (R11)(AX*1)
	ADDQ       $32, AX
	SUBQ       $-128, SI
	DECQ       CX
	JNZ        g4loop

g4done:
	VADDPD  Y9, Y8, Y8
	VADDPD  Y11, Y10, Y10
	VADDPD  Y10, Y8, Y8
	VMOVUPD Y8, (DX)
	VZEROUPPER
	RET
