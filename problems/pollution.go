package problems

import (
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// PollutionRates are the 25 rate constants k1…k25 of the pollution
// problem (Verwer 1994; Bari test set, pollu.f), in its units (ppm and
// minutes).
var PollutionRates = [25]float64{
	0.35, 26.6, 1.23e4, 8.6e-4, 8.2e-4,
	1.5e4, 1.3e-4, 2.4e4, 1.65e4, 9e3,
	2.2e-2, 1.2e4, 1.88, 1.63e4, 4.8e6,
	3.5e-4, 1.75e-2, 1e8, 4.44e11, 1.24e3,
	2.1, 5.78, 4.74e-2, 1.78e3, 3.12,
}

// pollutionRateNames lists the names of the rate constants, k1 to k25,
// for Problem.Doc (the command line reads the parameters' names there).
const pollutionRateNames = "k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11, k12, k13, " +
	"k14, k15, k16, k17, k18, k19, k20, k21, k22, k23, k24, k25"

// PollutionY0 is the initial state of the pollution problem: y2 = 0.2,
// y4 = 0.04, y7 = 0.1, y8 = 0.3, y9 = 0.01, y17 = 0.007 (1-based, as in
// the literature), the other species 0.
var PollutionY0 = [20]float64{
	0, 0.2, 0, 0.04, 0, 0, 0.1, 0.3, 0.01, 0,
	0, 0, 0, 0, 0, 0, 0.007, 0, 0, 0,
}

// PollutionRef is the solution of the pollution problem at t = 60 from
// PollutionY0 with PollutionRates: "computed using true double precision
// RADAU5 on Cray C90, uround = 1.01e-19, rtol = atol = h0 = 1.1e-18" (Bari
// test set, pollu.f revision 1.2 of 2006/10/02, subroutine solut; the
// tests check every value, bit for bit, against solut's Fortran
// literals). Its components span 4.4e-18 (y16) to 0.32 (y8).
var PollutionRef = [20]float64{
	0.5646255480022769e-01, 0.1342484130422339e+00, 0.4139734331099427e-08,
	0.5523140207484359e-02, 0.2018977262302196e-06, 0.1464541863493966e-06,
	0.7784249118997964e-01, 0.3245075353396018e+00, 0.7494013383880406e-02,
	0.1622293157301561e-07, 0.1135863833257075e-07, 0.2230505975721359e-02,
	0.2087162882798630e-03, 0.1396921016840158e-04, 0.8964884856898295e-02,
	0.4352846369330103e-17, 0.6899219696263405e-02, 0.1007803037365946e-03,
	0.1772146513969984e-05, 0.5682943292316392e-04,
}

// Pollution returns the pollution problem POLL: the chemical reaction
// part of the air pollution model of the Dutch National Institute of
// Public Health and Environmental Protection (RIVM), 25 reactions among
// 20 species (Verwer 1994; Hairer & Wanner II; Bari test set, pollu.f),
// with the 25 rate constants as per-trajectory parameters p = (k1, …,
// k25). In the literature's 1-based names, the reaction rates are
//
//	r1 = k1·y1         r2 = k2·y2·y4      r3 = k3·y5·y2      r4 = k4·y7
//	r5 = k5·y7         r6 = k6·y7·y6      r7 = k7·y9         r8 = k8·y9·y6
//	r9 = k9·y11·y2     r10 = k10·y11·y1   r11 = k11·y13      r12 = k12·y10·y2
//	r13 = k13·y14      r14 = k14·y1·y6    r15 = k15·y3       r16 = k16·y4
//	r17 = k17·y4       r18 = k18·y16      r19 = k19·y16      r20 = k20·y17·y6
//	r21 = k21·y19      r22 = k22·y19      r23 = k23·y1·y4    r24 = k24·y19·y1
//	r25 = k25·y20
//
// and the field is
//
//	y1'  = −r1 − r10 − r14 − r23 − r24 + r2 + r3 + r9 + r11 + r12 + r22 + r25
//	y2'  = −r2 − r3 − r9 − r12 + r1 + r21
//	y3'  = −r15 + r1 + r17 + r19 + r22
//	y4'  = −r2 − r16 − r17 − r23 + r15
//	y5'  = −r3 + 2·r4 + r6 + r7 + r13 + r20
//	y6'  = −r6 − r8 − r14 − r20 + r3 + 2·r18
//	y7'  = −r4 − r5 − r6 + r13
//	y8'  = r4 + r5 + r6 + r7
//	y9'  = −r7 − r8
//	y10' = −r12 + r7 + r9
//	y11' = −r9 − r10 + r8 + r11
//	y12' = r9
//	y13' = −r11 + r10
//	y14' = −r13 + r12
//	y15' = r14
//	y16' = −r18 − r19 + r16
//	y17' = −r20
//	y18' = r20
//	y19' = −r21 − r22 − r24 + r23 + r25
//	y20' = −r25 + r24
//
// Defaults: p = PollutionRates, y0 = PollutionY0, t ∈ [0, 60] (minutes);
// PollutionRef is the published y(60). The problem is stiff (rates up to
// k19 = 4.44e11) and its components span 1e-17 to 0.3, so it suits a pure
// relative tolerance (a tiny AbsTol) or per-component ode.Settings.AbsTols.
func Pollution() Problem {
	return Problem{
		Name: "pollution",
		Field: ode.Field{Name: "pollution", Dim: 20, Params: 25, Stiff: true,
			F: func(_ tape.V, yv, kv []tape.V) []tape.V {
				y := func(i int) tape.V { return yv[i-1] } // 1-based, as in the literature
				k := func(i int) tape.V { return kv[i-1] }
				r := [26]tape.V{
					1: k(1).Mul(y(1)), 2: k(2).Mul(y(2)).Mul(y(4)), 3: k(3).Mul(y(5)).Mul(y(2)),
					4: k(4).Mul(y(7)), 5: k(5).Mul(y(7)), 6: k(6).Mul(y(7)).Mul(y(6)),
					7: k(7).Mul(y(9)), 8: k(8).Mul(y(9)).Mul(y(6)), 9: k(9).Mul(y(11)).Mul(y(2)),
					10: k(10).Mul(y(11)).Mul(y(1)), 11: k(11).Mul(y(13)), 12: k(12).Mul(y(10)).Mul(y(2)),
					13: k(13).Mul(y(14)), 14: k(14).Mul(y(1)).Mul(y(6)), 15: k(15).Mul(y(3)),
					16: k(16).Mul(y(4)), 17: k(17).Mul(y(4)), 18: k(18).Mul(y(16)),
					19: k(19).Mul(y(16)), 20: k(20).Mul(y(17)).Mul(y(6)), 21: k(21).Mul(y(19)),
					22: k(22).Mul(y(19)), 23: k(23).Mul(y(1)).Mul(y(4)), 24: k(24).Mul(y(19)).Mul(y(1)),
					25: k(25).Mul(y(20)),
				}
				// sum returns Σ r[plus] − Σ r[minus], the losses first as in
				// pollu.f.
				sum := func(minus []int, plus ...int) tape.V {
					var s tape.V
					for i, j := range minus {
						if i == 0 {
							s = r[j].Neg()
						} else {
							s = s.Sub(r[j])
						}
					}
					for i, j := range plus {
						if i == 0 && len(minus) == 0 {
							s = r[j]
						} else {
							s = s.Add(r[j])
						}
					}
					return s
				}
				return []tape.V{
					sum([]int{1, 10, 14, 23, 24}, 2, 3, 9, 11, 12, 22, 25),
					sum([]int{2, 3, 9, 12}, 1, 21),
					sum([]int{15}, 1, 17, 19, 22),
					sum([]int{2, 16, 17, 23}, 15),
					sum([]int{3}, 4, 4, 6, 7, 13, 20),
					sum([]int{6, 8, 14, 20}, 3, 18, 18),
					sum([]int{4, 5, 6}, 13),
					sum(nil, 4, 5, 6, 7),
					sum([]int{7, 8}),
					sum([]int{12}, 7, 9),
					sum([]int{9, 10}, 8, 11),
					sum(nil, 9),
					sum([]int{11}, 10),
					sum([]int{13}, 12),
					sum(nil, 14),
					sum([]int{18, 19}, 16),
					sum([]int{20}),
					sum(nil, 20),
					sum([]int{21, 22, 24}, 23, 25),
					sum([]int{25}, 24),
				}
			}},
		Y0:    append([]float64(nil), PollutionY0[:]...),
		P:     append([]float64(nil), PollutionRates[:]...),
		T1:    60,
		Stiff: true,
		Doc: "POLL: air pollution chemistry (RIVM), 20 species, 25 reactions, rates up to 4.44e11, " +
			"p = (" + pollutionRateNames + ") = (0.35, 26.6, …, 3.12); Verwer (1994), Hairer & Wanner II, Bari test set pollu.f",
	}
}
