//go:build !purego

#include "textflag.h"

// The backward sweep's sums over a row's saves, four lanes at a time
// (saveSweep.coefBarRows, addRowRows). Lane q reads column col[q] of the
// save-major cotangents: save k's component c at bar[(k·d+c)·bs+col[q]]
// (or, with bs = 1 and col[q] its trajectory's offset j·K·d, the
// cotangents in the saves' own layout, saveSweep.barLayout),
// multiplied by scale (the four loaded one by one, then VMULPD); its
// saves of the row are lo[q] ≤ k < hi[q]. Every other lane's term of a
// save k in k0…k1-1 is −0, which leaves a sum as it is (x + −0 = x for
// every x), so each lane's sums are its own saves' terms added in the
// order of the save times, as the lane-by-lane loops add them.

// func coefRowsAVX(acc, gb, scr, bar, ts *float64, col, lo, hi *int, t, h *float64, k0, k1, bs, d, terms int, scale float64)
//
// acc[(j·d+c)·4+q] += θ^(j+1)·ȳ_c (j < terms) for lane q's saves k with
// ts[k] > t[q], θ = (ts[k] − t[q])/h[q] (VSUBPD, VDIVPD), θ^j by repeated
// multiplication, VMULPD then VADDPD: addPowers' values and order (a
// lane without a term adds −0: its θ set to +0 and its cotangents to
// −0, +0·−0). gb receives every save's d vectors of four cotangents
// (scaled, −0 in the lanes without save k), save k's at
// gb[(k−k0)·d·4:], for addRowsAVX's kept form (addRowsGBAVX).
//
// Sixteen saves at a time: first each save's θ, its cotangents (to gb,
// and masked to the scratch) and its powers θ^1…θ^T (T = terms rounded
// up to a multiple of 4) to the scratch scr (16·(d+T)·4 values); then,
// component by component, eight (or four) of acc's sums in registers
// over the sixteen saves in order: no sum goes through memory per save.
// acc holds T·d·4 values (its rows j ≥ terms receive terms of no use).
TEXT ·coefRowsAVX(SB), NOSPLIT, $56-128
	MOVQ         lo+48(FP), AX
	VMOVDQU      (AX), Y12
	MOVQ         hi+56(FP), AX
	VMOVDQU      (AX), Y13
	MOVQ         t+64(FP), AX
	VMOVUPD      (AX), Y14
	MOVQ         h+72(FP), AX
	VMOVUPD      (AX), Y15
	VBROADCASTSD scale+120(FP), Y11
	MOVQ         $0x8000000000000000, AX
	VMOVQ        AX, X10
	VPBROADCASTQ X10, Y10       // −0
	MOVQ         bs+96(FP), AX
	SHLQ         $3, AX          // a row's bytes
	IMULQ        d+104(FP), AX
	MOVQ         AX, rb-8(SP)    // a save's rows' bytes
	MOVQ         k0+80(FP), CX
	IMULQ        CX, AX
	MOVQ         bar+24(FP), SI
	ADDQ         AX, SI          // save k's first row
	MOVQ         gb+8(FP), AX
	MOVQ         AX, gk-16(SP)   // save k's cotangents in gb
	MOVQ         terms+112(FP), AX
	ADDQ         $3, AX
	ANDQ         $-4, AX
	MOVQ         AX, t4-24(SP)   // T
	ADDQ         d+104(FP), AX
	SHLQ         $5, AX
	MOVQ         AX, sb-32(SP)   // a save's bytes in the scratch: d + T vectors

blk:
	CMPQ  CX, k1+88(FP)
	JGE   cdone
	MOVQ  CX, kb-40(SP)
	LEAQ  16(CX), AX
	CMPQ  AX, k1+88(FP)
	CMOVQGT k1+88(FP), AX
	MOVQ  AX, ke-48(SP)
	MOVQ  col+40(FP), AX
	MOVQ  (AX), R11
	MOVQ  8(AX), R12
	MOVQ  16(AX), R13
	MOVQ  24(AX), BX
	MOVQ  bs+96(FP), R8
	SHLQ  $3, R8                // a row's bytes
	MOVQ  ts+32(FP), R10
	MOVQ  scr+16(FP), R14       // the scratch, save by save

	// Pass 1: each save's θ, cotangents and powers.
ck:
	CMPQ         CX, ke-48(SP)
	JGE          pass2
	VMOVQ        CX, X0
	VPBROADCASTQ X0, Y0
	VPCMPGTQ     Y0, Y12, Y1     // lo > k
	VPCMPGTQ     Y0, Y13, Y2     // hi > k
	VPANDN       Y2, Y1, Y0      // lo ≤ k < hi
	VBROADCASTSD (R10)(CX*8), Y4
	VCMPPD       $0x1e, Y14, Y4, Y5 // ts[k] > t
	VANDPD       Y5, Y0, Y3      // and ts[k] > t: the lanes with a term
	VSUBPD       Y14, Y4, Y6
	VDIVPD       Y15, Y6, Y6     // θ
	VXORPD       Y1, Y1, Y1
	VBLENDVPD    Y3, Y6, Y1, Y6  // +0 in the lanes without a term

	// The save's cotangents, d vectors of four lanes: to gb, −0 in the
	// lanes without save k; to the scratch, −0 in the lanes without a
	// term.
	MOVQ SI, DX
	MOVQ gk-16(SP), R9
	MOVQ d+104(FP), AX

cg:
	PREFETCHT0  128(DX)(R11*8) // the same row's line of the lanes sixteen on
	VMOVSD      (DX)(R11*8), X7
	VMOVHPD     (DX)(R12*8), X7, X7
	VMOVSD      (DX)(R13*8), X8
	VMOVHPD     (DX)(BX*8), X8, X8
	VINSERTF128 $1, X8, Y7, Y7
	VMULPD      Y11, Y7, Y7
	VBLENDVPD   Y3, Y7, Y10, Y9
	VMOVUPD     Y9, (R14)
	VBLENDVPD   Y0, Y7, Y10, Y7
	VMOVUPD     Y7, (R9)
	ADDQ        $32, R9
	ADDQ        $32, R14
	ADDQ        R8, DX
	DECQ        AX
	JNZ         cg

	// θ^1…θ^T.
	VMOVAPD Y6, Y8
	MOVQ    t4-24(SP), AX

cp:
	VMOVUPD Y8, (R14)
	ADDQ    $32, R14
	VMULPD  Y6, Y8, Y8
	DECQ    AX
	JNZ     cp

	MOVQ d+104(FP), AX
	SHLQ $5, AX
	ADDQ AX, gk-16(SP)
	INCQ CX
	ADDQ rb-8(SP), SI
	JMP  ck

	// Pass 2: acc += θ^j·ȳ over the block's saves in order, component by
	// component, eight or four terms' sums at a time in Y0…Y7.
pass2:
	MOVQ d+104(FP), R9
	SHLQ $5, R9                 // from term j's sums to j+1's
	LEAQ (R9)(R9*2), R8         // three of them
	XORQ R11, R11               // the component

p2c:
	CMPQ R11, d+104(FP)
	JGE  blk
	XORQ R12, R12               // the first term of the sums

p2j:
	MOVQ t4-24(SP), AX
	SUBQ R12, AX
	JLE  p2cnext
	MOVQ R12, R13
	IMULQ d+104(FP), R13
	ADDQ R11, R13
	SHLQ $5, R13
	ADDQ acc+0(FP), R13         // sums of term R12, component R11
	MOVQ d+104(FP), R14
	ADDQ R12, R14
	SUBQ R11, R14
	SHLQ $5, R14                // from a save's cotangent c to its θ^(R12+1)
	MOVQ R11, DX
	SHLQ $5, DX
	ADDQ scr+16(FP), DX         // the first save's cotangent c
	MOVQ ke-48(SP), BX
	SUBQ kb-40(SP), BX          // the block's saves
	CMPQ AX, $8
	JLT  p2four

	LEAQ    (R13)(R9*4), R10
	VMOVUPD (R13), Y0
	VMOVUPD (R13)(R9*1), Y1
	VMOVUPD (R13)(R9*2), Y2
	VMOVUPD (R13)(R8*1), Y3
	VMOVUPD (R10), Y4
	VMOVUPD (R10)(R9*1), Y5
	VMOVUPD (R10)(R9*2), Y6
	VMOVUPD (R10)(R8*1), Y7

p2e:
	VMOVUPD (DX), Y8
	VMOVUPD (DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y0, Y9, Y0
	VMOVUPD 32(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y1, Y9, Y1
	VMOVUPD 64(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y2, Y9, Y2
	VMOVUPD 96(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y3, Y9, Y3
	VMOVUPD 128(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y4, Y9, Y4
	VMOVUPD 160(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y5, Y9, Y5
	VMOVUPD 192(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y6, Y9, Y6
	VMOVUPD 224(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y7, Y9, Y7
	ADDQ    sb-32(SP), DX
	DECQ    BX
	JNZ     p2e

	VMOVUPD Y0, (R13)
	VMOVUPD Y1, (R13)(R9*1)
	VMOVUPD Y2, (R13)(R9*2)
	VMOVUPD Y3, (R13)(R8*1)
	VMOVUPD Y4, (R10)
	VMOVUPD Y5, (R10)(R9*1)
	VMOVUPD Y6, (R10)(R9*2)
	VMOVUPD Y7, (R10)(R8*1)
	ADDQ    $8, R12
	JMP     p2j

p2four:
	VMOVUPD (R13), Y0
	VMOVUPD (R13)(R9*1), Y1
	VMOVUPD (R13)(R9*2), Y2
	VMOVUPD (R13)(R8*1), Y3

p2f:
	VMOVUPD (DX), Y8
	VMOVUPD (DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y0, Y9, Y0
	VMOVUPD 32(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y1, Y9, Y1
	VMOVUPD 64(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y2, Y9, Y2
	VMOVUPD 96(DX)(R14*1), Y9
	VMULPD  Y8, Y9, Y9
	VADDPD  Y3, Y9, Y3
	ADDQ    sb-32(SP), DX
	DECQ    BX
	JNZ     p2f

	VMOVUPD Y0, (R13)
	VMOVUPD Y1, (R13)(R9*1)
	VMOVUPD Y2, (R13)(R9*2)
	VMOVUPD Y3, (R13)(R8*1)
	ADDQ    $4, R12
	JMP     p2j

p2cnext:
	INCQ R11
	JMP  p2c

cdone:
	VZEROUPPER
	RET

// func addRowsAVX(lam, bar *float64, col, lo, hi *int, k0, k1, bs, d int, scale float64)
//
// lam[c·4+q] += ȳ_c of lane q's saves k, in the order of k.
TEXT ·addRowsAVX(SB), NOSPLIT, $0-80
	MOVQ         col+16(FP), AX
	MOVQ         (AX), R11
	MOVQ         8(AX), R12
	MOVQ         16(AX), R13
	MOVQ         24(AX), BX
	MOVQ         lo+24(FP), AX
	VMOVDQU      (AX), Y12
	MOVQ         hi+32(FP), AX
	VMOVDQU      (AX), Y13
	VBROADCASTSD scale+72(FP), Y11
	MOVQ         $0x8000000000000000, AX
	VMOVQ        AX, X10
	VPBROADCASTQ X10, Y10        // −0
	MOVQ         bs+56(FP), R8
	SHLQ         $3, R8          // a row's bytes
	MOVQ         k0+40(FP), CX
	MOVQ         CX, AX
	IMULQ        d+64(FP), AX
	IMULQ        R8, AX
	MOVQ         bar+8(FP), SI
	ADDQ         AX, SI          // save k's first row

lk:
	CMPQ         CX, k1+48(FP)
	JGE          ldone
	VMOVQ        CX, X0
	VPBROADCASTQ X0, Y0
	VPCMPGTQ     Y0, Y12, Y1     // lo > k
	VPCMPGTQ     Y0, Y13, Y2     // hi > k
	VPANDN       Y2, Y1, Y3      // lo ≤ k < hi
	MOVQ         lam+0(FP), DI
	MOVQ         d+64(FP), AX

lc:
	VMOVSD      (SI)(R11*8), X7
	VMOVHPD     (SI)(R12*8), X7, X7
	VMOVSD      (SI)(R13*8), X8
	VMOVHPD     (SI)(BX*8), X8, X8
	VINSERTF128 $1, X8, Y7, Y7
	VMULPD      Y11, Y7, Y7
	VBLENDVPD   Y3, Y7, Y10, Y7
	VADDPD      (DI), Y7, Y7
	VMOVUPD     Y7, (DI)
	ADDQ        $32, DI
	ADDQ        R8, SI
	DECQ        AX
	JNZ         lc

	INCQ CX
	JMP  lk

ldone:
	VZEROUPPER
	RET

// func addRowsGBAVX(lam, gb *float64, lo, hi *int, k0, k1, d int)
//
// lam[c·4+q] += ȳ_c of lane q's saves k, in the order of k, as addRowsAVX
// adds them, reading the cotangents coefRowsAVX wrote to gb for the same
// four lanes and saves k0…k1-1 (save k's at gb[(k−k0)·d·4:]) instead of
// the save-major rows.
TEXT ·addRowsGBAVX(SB), NOSPLIT, $0-56
	MOVQ         lo+16(FP), AX
	VMOVDQU      (AX), Y12
	MOVQ         hi+24(FP), AX
	VMOVDQU      (AX), Y13
	MOVQ         $0x8000000000000000, AX
	VMOVQ        AX, X10
	VPBROADCASTQ X10, Y10        // −0
	MOVQ         gb+8(FP), SI
	MOVQ         k0+32(FP), CX

gk:
	CMPQ         CX, k1+40(FP)
	JGE          gdone
	VMOVQ        CX, X0
	VPBROADCASTQ X0, Y0
	VPCMPGTQ     Y0, Y12, Y1     // lo > k
	VPCMPGTQ     Y0, Y13, Y2     // hi > k
	VPANDN       Y2, Y1, Y3      // lo ≤ k < hi
	MOVQ         lam+0(FP), DI
	MOVQ         d+48(FP), AX

gc:
	VMOVUPD   (SI), Y7
	VBLENDVPD Y3, Y7, Y10, Y7
	VADDPD    (DI), Y7, Y7
	VMOVUPD   Y7, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      AX
	JNZ       gc

	INCQ CX
	JMP  gk

gdone:
	VZEROUPPER
	RET

// func scatterColAVX(dst, src *float64, n, stride int)
//
// dst[x·stride] = src[x] for x < n, prefetching each destination's line
// eight values on (the next eight columns' line of the same row).
TEXT ·scatterColAVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ stride+24(FP), R8
	SHLQ $3, R8
	TESTQ CX, CX
	JEQ  sdone

sloop:
	PREFETCHT0 64(DI)
	MOVQ      (SI), AX
	MOVQ      AX, (DI)
	ADDQ      $8, SI
	ADDQ      R8, DI
	DECQ      CX
	JNZ       sloop

sdone:
	RET

// func gatherRows4AVX(dst, c0, c1, c2, c3 *float64, n, stride int)
//
// dst[i·stride+q] = cq[i] for i < n (n a multiple of 4, q < 4): four
// columns' values of four lanes at a time, loaded as four vectors and
// transposed (VUNPCKLPD/VUNPCKHPD, VPERM2F128) into four rows' four
// values. Copies only: the values are the columns' bits.
TEXT ·gatherRows4AVX(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ c0+8(FP), R8
	MOVQ c1+16(FP), R9
	MOVQ c2+24(FP), R10
	MOVQ c3+32(FP), R11
	MOVQ n+40(FP), CX
	MOVQ stride+48(FP), DX
	SHLQ $3, DX              // a row's bytes
	LEAQ (DX)(DX*2), BX      // three rows' bytes
	XORQ AX, AX              // the lanes' byte offset in the columns
	SHRQ $2, CX
	JEQ  gdone

gloop:
	VMOVUPD     (R8)(AX*1), Y0  // column 0, lanes i…i+3
	VMOVUPD     (R9)(AX*1), Y1
	VMOVUPD     (R10)(AX*1), Y2
	VMOVUPD     (R11)(AX*1), Y3
	VUNPCKLPD   Y1, Y0, Y4      // c0[i] c1[i] c0[i+2] c1[i+2]
	VUNPCKHPD   Y1, Y0, Y5      // c0[i+1] c1[i+1] c0[i+3] c1[i+3]
	VUNPCKLPD   Y3, Y2, Y6
	VUNPCKHPD   Y3, Y2, Y7
	VPERM2F128  $0x20, Y6, Y4, Y0 // lane i's four columns
	VPERM2F128  $0x20, Y7, Y5, Y1 // lane i+1's
	VPERM2F128  $0x31, Y6, Y4, Y2 // lane i+2's
	VPERM2F128  $0x31, Y7, Y5, Y3 // lane i+3's
	VMOVUPD     Y0, (DI)
	VMOVUPD     Y1, (DI)(DX*1)
	VMOVUPD     Y2, (DI)(DX*2)
	VMOVUPD     Y3, (DI)(BX*1)
	ADDQ        $32, AX
	LEAQ        (DI)(DX*4), DI
	DECQ        CX
	JNZ         gloop

gdone:
	VZEROUPPER
	RET

// func prefetchSpans(base *float64, off, lines *int, n int)
//
// Prefetches, for q < n, lines[q] cache lines from base[off[q]] on: the
// next lanes' cotangents of a row in the saves' own layout, each lane's
// a span of its own (coefBarRows).
TEXT ·prefetchSpans(SB), NOSPLIT, $0-32
	MOVQ  base+0(FP), SI
	MOVQ  off+8(FP), DI
	MOVQ  lines+16(FP), R8
	MOVQ  n+24(FP), CX
	TESTQ CX, CX
	JEQ   pdone

ploop:
	MOVQ (DI), AX
	LEAQ (SI)(AX*8), AX
	MOVQ (R8), BX

pline:
	TESTQ      BX, BX
	JEQ        pnext
	PREFETCHT0 (AX)
	ADDQ       $64, AX
	DECQ       BX
	JMP        pline

pnext:
	ADDQ $8, DI
	ADDQ $8, R8
	DECQ CX
	JNZ  ploop

pdone:
	RET

// The backward sweep's sums over a row's saves in the saves' own layout
// (Saves.BarMajor false), one lane at a time (saveSweep.coefBarLanes,
// addRowLanes): a lane's saves of the row are one span of its
// trajectory's row, a save's d components side by side, so four
// components are one vector and no lanes are transposed. Each sum is the
// lane-by-lane loops' (addPowers, addRow) in the same order, each
// operation with the operands in the order coefRowsAVX and addRowsAVX
// give them.

// CLTERM adds θ^j·ȳ (θ^j broadcast from off(DX), ȳ in Y1) to acc.
#define CLTERM(off, acc) VBROADCASTSD off(DX), Y3; VMULPD Y1, Y3, Y4; VADDPD acc, Y4, acc

// CLSTORE stores the four values of Y (X its low half) to lane R8's
// entries (byte offset R8) of the four columns whose slice headers are
// at AX, 24(AX), 48(AX) and 72(AX), then moves AX to the next term's
// columns (R10 bytes on).
#define CLSTORE(Y, X) MOVQ (AX), SI; VMOVSD X, (SI)(R8*1); MOVQ 24(AX), SI; VMOVHPD X, (SI)(R8*1); VEXTRACTF128 $1, Y, X3; MOVQ 48(AX), SI; VMOVSD X3, (SI)(R8*1); MOVQ 72(AX), SI; VMOVHPD X3, (SI)(R8*1); ADDQ R10, AX

// func coefLaneAVX(wb *[]float64, i int, gb, ys, ts, scr *float64, n int, t, h float64, d, terms int, scale float64)
//
// wb[j·d+c][i] = Σ_k θ_k^(j+1)·(ys[k·d+c]·scale) for j < terms (1…8), c < d
// (a multiple of 4), over the n ≥ 1 saves k in order, θ_k = (ts[k] −
// t)/h (VSUBPD, VDIVPD), θ^j by repeated multiplication, each sum from +0
// (addPowers' values and order: the sums coefRowsAVX computes for a lane
// whose saves ts[0…n-1] all have a term); gb[k·d+c] = ys[k·d+c]·scale,
// kept for addLaneAVX. First P = 4 (terms ≤ 4) or 8 powers of every save
// to scr (four saves at a time: save 4q+r's θ^(j+1) at scr[(q·P+j)·4+r],
// ⌈n/4⌉·4·P values), then, four components at a time, P sums (seven
// where terms is 7) in Y5…Y12 over the saves, without a test a term (those
// past terms are of no use).
TEXT ·coefLaneAVX(SB), NOSPLIT, $0-96
	MOVQ         ts+32(FP), R10
	MOVQ         scr+40(FP), DI
	MOVQ         n+48(FP), CX
	VBROADCASTSD t+56(FP), Y14
	VBROADCASTSD h+64(FP), Y15
	MOVQ         $4, R12
	CMPQ         terms+80(FP), $4
	JLE          clp
	MOVQ         $8, R12

clp:
	MOVQ R12, R9
	SHLQ $5, R9                  // four saves' powers' bytes

clquads:
	CMPQ    CX, $4
	JLT     cltail
	VMOVUPD (R10), Y0
	VSUBPD  Y14, Y0, Y0
	VDIVPD  Y15, Y0, Y0          // four saves' θ
	VMOVAPD Y0, Y1
	MOVQ    DI, SI
	MOVQ    R12, DX

clqpow:
	VMOVUPD Y1, (SI)
	ADDQ    $32, SI
	VMULPD  Y0, Y1, Y1
	DECQ    DX
	JNZ     clqpow
	ADDQ    R9, DI
	ADDQ    $32, R10
	SUBQ    $4, CX
	JMP     clquads

cltail:
	MOVQ DI, BX                  // the last quad's first save

clt:
	TESTQ   CX, CX
	JEQ     clsums
	VMOVSD  (R10), X0
	VSUBSD  X14, X0, X0
	VDIVSD  X15, X0, X0          // θ
	VMOVAPD X0, X1
	MOVQ    BX, SI
	MOVQ    R12, DX

cltpow:
	VMOVSD  X1, (SI)
	ADDQ    $32, SI
	VMULSD  X0, X1, X1
	DECQ    DX
	JNZ     cltpow
	ADDQ    $8, BX
	ADDQ    $8, R10
	DECQ    CX
	JMP     clt

clsums:
	VBROADCASTSD scale+88(FP), Y13
	MOVQ         d+72(FP), R13
	SHLQ         $3, R13         // a save's bytes
	LEAQ         -24(R9), R11    // from save 4q+3's powers to save 4q+4's
	MOVQ         i+8(FP), R8
	SHLQ         $3, R8          // the lane's bytes in a column
	XORQ         BX, BX          // the components' offset in bytes

clblock:
	CMPQ   BX, R13
	JGE    cldone
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	MOVQ   ys+24(FP), SI
	ADDQ   BX, SI                // save 0's components
	MOVQ   gb+16(FP), DI
	ADDQ   BX, DI                // their kept copy
	MOVQ   scr+40(FP), DX        // save 0's powers
	MOVQ   n+48(FP), CX
	XORQ   R14, R14              // the save's place in its quad
	CMPQ   R12, $8
	JNE    clsave4
	CMPQ   terms+80(FP), $7
	JEQ    clsave7
	JMP    clsave8

clsave4:
	VMOVUPD (SI), Y1
	VMULPD  Y13, Y1, Y1          // ȳ
	VMOVUPD Y1, (DI)
	CLTERM(0, Y5)
	CLTERM(32, Y6)
	CLTERM(64, Y7)
	CLTERM(96, Y8)
	ADDQ    R13, SI
	ADDQ    R13, DI
	LEAQ    8(DX), AX
	INCQ    R14
	CMPQ    R14, $4
	JNE     cl4next
	XORQ    R14, R14
	LEAQ    (DX)(R11*1), AX

cl4next:
	MOVQ AX, DX
	DECQ CX
	JNZ  clsave4
	JMP  clstore

clsave8:
	VMOVUPD (SI), Y1
	VMULPD  Y13, Y1, Y1          // ȳ
	VMOVUPD Y1, (DI)
	CLTERM(0, Y5)
	CLTERM(32, Y6)
	CLTERM(64, Y7)
	CLTERM(96, Y8)
	CLTERM(128, Y9)
	CLTERM(160, Y10)
	CLTERM(192, Y11)
	CLTERM(224, Y12)
	ADDQ    R13, SI
	ADDQ    R13, DI
	LEAQ    8(DX), AX
	INCQ    R14
	CMPQ    R14, $4
	JNE     cl8next
	XORQ    R14, R14
	LEAQ    (DX)(R11*1), AX

cl8next:
	MOVQ AX, DX
	DECQ CX
	JNZ  clsave8
	JMP  clstore

clsave7: // (Vern7's seven terms: the eighth sum left out)
	VMOVUPD (SI), Y1
	VMULPD  Y13, Y1, Y1          // ȳ
	VMOVUPD Y1, (DI)
	CLTERM(0, Y5)
	CLTERM(32, Y6)
	CLTERM(64, Y7)
	CLTERM(96, Y8)
	CLTERM(128, Y9)
	CLTERM(160, Y10)
	CLTERM(192, Y11)
	ADDQ    R13, SI
	ADDQ    R13, DI
	LEAQ    8(DX), AX
	INCQ    R14
	CMPQ    R14, $4
	JNE     cl7next
	XORQ    R14, R14
	LEAQ    (DX)(R11*1), AX

cl7next:
	MOVQ AX, DX
	DECQ CX
	JNZ  clsave7

clstore:
	MOVQ terms+80(FP), CX
	MOVQ wb+0(FP), AX
	LEAQ (BX)(BX*2), SI
	ADDQ SI, AX                  // the headers of term 1's columns of these components
	MOVQ R13, R10
	LEAQ (R10)(R10*2), R10       // from a term's columns to the next's: d headers
	CLSTORE(Y5, X5)
	CMPQ CX, $2
	JLT  clbnext
	CLSTORE(Y6, X6)
	CMPQ CX, $3
	JLT  clbnext
	CLSTORE(Y7, X7)
	CMPQ CX, $4
	JLT  clbnext
	CLSTORE(Y8, X8)
	CMPQ CX, $5
	JLT  clbnext
	CLSTORE(Y9, X9)
	CMPQ CX, $6
	JLT  clbnext
	CLSTORE(Y10, X10)
	CMPQ CX, $7
	JLT  clbnext
	CLSTORE(Y11, X11)
	CMPQ CX, $8
	JLT  clbnext
	CLSTORE(Y12, X12)

clbnext:
	ADDQ $32, BX
	JMP  clblock

cldone:
	VZEROUPPER
	RET

// func addLaneAVX(lam *[]float64, i int, ys *float64, n, d int, scale float64)
//
// lam[c][i] += ys[k·d+c]·scale for c < d (a multiple of 4) and each of the
// n ≥ 1 saves k in order (addRowsAVX's sums for one lane), four
// components at a time in a register.
TEXT ·addLaneAVX(SB), NOSPLIT, $0-48
	MOVQ         i+8(FP), R8
	SHLQ         $3, R8          // the lane's bytes in a column
	MOVQ         d+32(FP), R13
	SHLQ         $3, R13         // a save's bytes
	VBROADCASTSD scale+40(FP), Y13
	XORQ         BX, BX          // the components' offset in bytes

alblock:
	CMPQ        BX, R13
	JGE         aldone
	MOVQ        lam+0(FP), AX
	LEAQ        (BX)(BX*2), SI
	ADDQ        SI, AX           // the headers of these components' columns
	MOVQ        (AX), SI
	VMOVSD      (SI)(R8*1), X0
	MOVQ        24(AX), SI
	VMOVHPD     (SI)(R8*1), X0, X0
	MOVQ        48(AX), SI
	VMOVSD      (SI)(R8*1), X2
	MOVQ        72(AX), SI
	VMOVHPD     (SI)(R8*1), X2, X2
	VINSERTF128 $1, X2, Y0, Y0   // λ
	MOVQ        ys+16(FP), SI
	ADDQ        BX, SI
	MOVQ        n+24(FP), CX

alsave:
	VMOVUPD (SI), Y1
	VMULPD  Y13, Y1, Y1
	VADDPD  Y0, Y1, Y0
	ADDQ    R13, SI
	DECQ    CX
	JNZ     alsave

	MOVQ         (AX), SI
	VMOVSD       X0, (SI)(R8*1)
	MOVQ         24(AX), SI
	VMOVHPD      X0, (SI)(R8*1)
	VEXTRACTF128 $1, Y0, X2
	MOVQ         48(AX), SI
	VMOVSD       X2, (SI)(R8*1)
	MOVQ         72(AX), SI
	VMOVHPD      X2, (SI)(R8*1)
	ADDQ         $32, BX
	JMP          alblock

aldone:
	VZEROUPPER
	RET

// func coefLanesAVX(wb *[]float64, gb, bar, ts, scr *float64, perm, lo, hi *int, t, h *float64, m, cs, d, terms, keep int, scale float64)
//
// coefLaneAVX for each lane i < m of a row: its saves lo[i] ≤ k < hi[i],
// save k's cotangents at bar[perm[i]·cs + k·d:], the first of them with
// ts[k] > t[i] on (those at the step's start have no term: their
// cotangents, scaled, only go to gb); a lane with no term gets zeros. gb
// receives every save's scaled cotangents, lane after lane (keep 1), or
// each lane's over the last's (keep 0: a scratch of the most saves' d
// values). Before each lane it prefetches the span of lane i+4's.
TEXT ·coefLanesAVX(SB), NOSPLIT, $136-128
	MOVQ $0, li-8(SP)
	MOVQ gb+8(FP), AX
	MOVQ AX, gp-16(SP)

lanes:
	MOVQ li-8(SP), CX
	CMPQ CX, m+80(FP)
	JGE  lanesdone

	// Prefetch lane i+4's span.
	LEAQ  4(CX), AX
	CMPQ  AX, m+80(FP)
	JGE   lane
	MOVQ  perm+40(FP), SI
	MOVQ  (SI)(AX*8), R8
	IMULQ cs+88(FP), R8
	MOVQ  lo+48(FP), SI
	MOVQ  (SI)(AX*8), R9
	MOVQ  hi+56(FP), SI
	MOVQ  (SI)(AX*8), R10
	SUBQ  R9, R10
	IMULQ d+96(FP), R9
	ADDQ  R9, R8
	MOVQ  bar+16(FP), SI
	LEAQ  (SI)(R8*8), SI          // its first save
	IMULQ d+96(FP), R10
	SHLQ  $3, R10
	ADDQ  $63, R10
	SHRQ  $6, R10
	INCQ  R10                     // its lines (64 bytes), one more for a span across lines

pf:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	DECQ       R10
	JNZ        pf

lane:
	MOVQ lo+48(FP), SI
	MOVQ (SI)(CX*8), R9           // l
	MOVQ hi+56(FP), SI
	MOVQ (SI)(CX*8), R10          // e
	CMPQ R9, R10
	JEQ  zero
	MOVQ  perm+40(FP), SI
	MOVQ  (SI)(CX*8), R8
	IMULQ cs+88(FP), R8
	MOVQ  R9, AX
	IMULQ d+96(FP), AX
	ADDQ  AX, R8
	MOVQ  bar+16(FP), SI
	LEAQ  (SI)(R8*8), SI          // save l's cotangents
	MOVQ  gp-16(SP), DI           // their kept copy
	MOVQ  t+64(FP), AX
	VMOVSD (AX)(CX*8), X1         // t[i]
	MOVQ  ts+24(FP), BX
	VBROADCASTSD scale+120(FP), Y13
	MOVQ  d+96(FP), R13
	SHLQ  $3, R13                 // a save's bytes
	MOVQ  R9, R11                 // k

prefix:
	CMPQ     R11, R10
	JGE      prefixdone
	VMOVSD   (BX)(R11*8), X0
	VUCOMISD X1, X0
	JHI      prefixdone           // ts[k] > t[i]: the saves from k on have a term
	XORQ     AX, AX

pcopy:
	VMOVUPD (SI)(AX*1), Y2
	VMULPD  Y13, Y2, Y2
	VMOVUPD Y2, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, R13
	JLT     pcopy
	ADDQ    R13, SI
	ADDQ    R13, DI
	INCQ    R11
	JMP     prefix

prefixdone:
	MOVQ R10, R12
	SUBQ R11, R12                 // the saves with a term
	JEQ  nolterm
	MOVQ wb+0(FP), AX
	MOVQ AX, 0(SP)
	MOVQ CX, 8(SP)
	MOVQ DI, 16(SP)
	MOVQ SI, 24(SP)
	LEAQ (BX)(R11*8), AX
	MOVQ AX, 32(SP)
	MOVQ scr+32(FP), AX
	MOVQ AX, 40(SP)
	MOVQ R12, 48(SP)
	VMOVSD X1, 56(SP)
	MOVQ h+72(FP), AX
	MOVQ (AX)(CX*8), AX
	MOVQ AX, 64(SP)
	MOVQ d+96(FP), AX
	MOVQ AX, 72(SP)
	MOVQ terms+104(FP), AX
	MOVQ AX, 80(SP)
	MOVQ scale+120(FP), AX
	MOVQ AX, 88(SP)
	CALL ·coefLaneAVX(SB)
	JMP  advance

nolterm:
	JMP zerow

advance:
	CMPQ keep+112(FP), $0
	JEQ  next
	MOVQ li-8(SP), CX
	MOVQ lo+48(FP), SI
	MOVQ hi+56(FP), DI
	MOVQ (DI)(CX*8), AX
	SUBQ (SI)(CX*8), AX
	IMULQ d+96(FP), AX
	SHLQ $3, AX
	ADDQ AX, gp-16(SP)
	JMP  next

zero:
zerow: // w̄ = 0 for lane i (no term)
	MOVQ  li-8(SP), R8
	MOVQ  wb+0(FP), AX
	MOVQ  terms+104(FP), DX
	IMULQ d+96(FP), DX

zloop:
	MOVQ (AX), SI
	MOVQ $0, (SI)(R8*8)
	ADDQ $24, AX
	DECQ DX
	JNZ  zloop
	JMP  advance

next:
	INCQ li-8(SP)
	JMP  lanes

lanesdone:
	VZEROUPPER
	RET
