package ode

// Rodas5P coefficients.
//
// Reference: G. Steinebach, "Construction of Rosenbrock–Wanner method Rodas5P
// and numerical benchmarks within the Julia Differential Equations package",
// BIT Numerical Mathematics 63:27, 2023, doi:10.1007/s10543-023-00967-x.
//
// Transcribed in the stored (a, C) form from SciML/OrdinaryDiffEq.jl,
// lib/OrdinaryDiffEqRosenbrock/src/rosenbrock_tableaus.jl (Rodas5PTableau: the
// matrices A and C, gamma, the vectors c and d, and the 3×8 dense-output
// matrix H); the published coefficients carry about 16 significant digits.
// patrick-kidger/diffrax, diffrax/_solver/rodas5p.py, has the same a_lower,
// c_lower, α (= c) and γ (= d) digit for digit.
//
// The method is stiffly accurate: rows 7 and 8 of a repeat row 6 followed by
// ones, and the solution is the argument of stage 8 plus u_8,
//
//	y⁺ = y + Σ_{j<8} a_8j·u_j + u_8,   b = (a_6·, 1, 1, 1),
//
// as OrdinaryDiffEq.jl and DiffEqGPU.jl (perform_step/gpu_rodas5P_perform_step.jl:
// "u = u + k8") compute it; the embedded order-4 solution is the argument of
// stage 8, b̂ = (a_6·, 1, 1, 0), so the error estimate is u_8. (diffrax names
// these the other way round, m_sol = (a_6·, 1, 1, 0), m_error = (a_6·, 1, 1,
// 1); TestRosenbrockRodas5POrder measures which combination has order 5.)

// rodas5PA6 is row 6 of a, which rows 7 and 8 and the weights repeat.
const (
	rodas5PA61 = -7.502846399306121
	rodas5PA62 = 2.561846144803919
	rodas5PA63 = -11.627539656261098
	rodas5PA64 = -0.18268767659942256
	rodas5PA65 = 0.030198172008377946
)

// rodas5PStored is Rodas5P in the (a, C) form in which it is published.
var rodas5PStored = &rosenbrockACForm{
	Name:     "Rodas5P",
	Order:    5,
	ErrOrder: 4,
	Gamma:    0.21193756319429014,
	A: [][]float64{
		{},
		{3.0},
		{2.849394379747939, 0.45842242204463923},
		{-6.954028509809101, 2.489845061869568, -10.358996098473584},
		{2.8029986275628964, 0.5072464736228206, -0.3988312541770524, -0.04721187230404641},
		{rodas5PA61, rodas5PA62, rodas5PA63, rodas5PA64, rodas5PA65},
		{rodas5PA61, rodas5PA62, rodas5PA63, rodas5PA64, rodas5PA65, 1},
		{rodas5PA61, rodas5PA62, rodas5PA63, rodas5PA64, rodas5PA65, 1, 1},
	},
	C: [][]float64{
		{},
		{-14.155112264123755},
		{-17.97296035885952, -2.859693295451294},
		{147.12150275711716, -1.41221402718213, 71.68940251302358},
		{165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306},
		{24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125, -0.6610691825249471},
		{30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783, -19.097331116725623, -28.087943162872662},
		{37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047, -40.06618937091002, -54.66780262877968, -9.48861652309627},
	},
	Nodes: []float64{0, 0.6358126895828704, 0.4095798393397535, 0.9769306725060716, 0.4288403609558664, 1, 1, 1},
	D:     []float64{0.21193756319429014, -0.42387512638858027, -0.3384627126235924, 1.8046452872882734, 2.325825639765069, 0, 0, 0},
	B:     []float64{rodas5PA61, rodas5PA62, rodas5PA63, rodas5PA64, rodas5PA65, 1, 1, 1},
	BHat:  []float64{rodas5PA61, rodas5PA62, rodas5PA63, rodas5PA64, rodas5PA65, 1, 1, 0},
	H: [][]float64{
		{25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204, 0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493},
		{-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796, 20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372},
		{11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643, -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722},
	},
}

// rodas5PTableau is Rodas5P (Steinebach 2023), an 8-stage, stiffly accurate,
// order 5(4) Rosenbrock method with γ = 0.21193756319429014 and an order-4
// dense output, converted at initialisation from rodas5PStored to the α/Γ
// form (see RosenbrockTableau and rosenbrockACForm.alphaGamma).
var rodas5PTableau = rodas5PStored.alphaGamma()
