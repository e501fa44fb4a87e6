// What the hand-written Tsit5 kernels share (lorenz_tsit5.cu,
// neural_tsit5.cu): statuses, the tableau, the controller's constants and
// small helpers. A kernel file includes it after defining GS_DEVICE; bench
// embeds the kernel sources with this text in place of the #include line
// (withTsit5Header), for NVRTC and for the host tests alike.

// Statuses, the values of ode.Status, and one of the record kernel's own.
enum {
	GS_OK = 0,
	GS_MAX_STEPS = 1,          // the step budget (accepted + rejected) ran out
	GS_STEP_UNDERFLOW = 2,     // the step size fell below the resolution of t
	GS_NON_FINITE = 3,         // the last trial steps were NaN or infinite
	GS_RECORD_FULL = 5,        // more accepted steps than rows in the record buffer
};

// Tsit5 (Tsitouras 2011), the digits of bench's baseline and diffrax. The
// error weights e = b - bh are the exactly rounded differences.
static constexpr double A21 = 0.161;
static constexpr double A31 = -0.8480655492356988544426874250230774675121177393430391537369234245294192976164141156943e-2;
static constexpr double A32 = 0.3354806554923569885444268742502307746751211773934303915373692342452941929761641411569;
static constexpr double A41 = 2.897153057105493432130432594192938764924887287701866490314866693455023795137503079289;
static constexpr double A42 = -6.359448489975074843148159912383825625952700647415626703305928850207288721235210244366;
static constexpr double A43 = 4.362295432869581411017727318190886861027813359713760212991062156752264926097707165077;
static constexpr double A51 = 5.325864828439256604428877920840511317836476253097040101202360397727981648835607691791;
static constexpr double A52 = -11.74888356406282787774717033978577296188744178259862899288666928009020615663593781589;
static constexpr double A53 = 7.495539342889836208304604784564358155658679161518186721010132816213648793440552049753;
static constexpr double A54 = -0.9249506636175524925650207933207191611349983406029535244034750452930469056411389539635e-1;
static constexpr double A61 = 5.861455442946420028659251486982647890394337666164814434818157239052507339770711679748;
static constexpr double A62 = -12.92096931784710929170611868178335939541780751955743459166312250439928519268343184452;
static constexpr double A63 = 8.159367898576158643180400794539253485181918321135053305748355423955009222648673734986;
static constexpr double A64 = -0.7158497328140099722453054252582973869127213147363544882721139659546372402303777878835e-1;
static constexpr double A65 = -0.2826905039406838290900305721271224146717633626879770007617876201276764571291579142206e-1;
static constexpr double B1 = 0.9646076681806522951816731316512876333711995238157997181903319145764851595234062815396e-1;
static constexpr double B2 = 0.01;
static constexpr double B3 = 0.4798896504144995747752495322905965199130404621990332488332634944254542060153074523509;
static constexpr double B4 = 1.379008574103741893192274821856872770756462643091360525934940067397245698027561293331;
static constexpr double B5 = -3.290069515436080679901047585711363850115683290894936158531296799594813811049925401677;
static constexpr double B6 = 2.324710524099773982415355918398765796109060233222962411944060046314465391054716027841;
static constexpr double E1 = 0.0017800110522257714;
static constexpr double E2 = 0.00081643445965674691;
static constexpr double E3 = -0.0078808780102619953;
static constexpr double E4 = 0.14471100717326291;
static constexpr double E5 = -0.58235716545255523;
static constexpr double E6 = 0.45808210592918697;
static constexpr double E7 = -0.015151515151515152; // -1/66

// The integral controller of Tsit5 and its limits.
static constexpr double CTL_BETA = 0.2;
static constexpr double CTL_SAFETY = 0.9;
static constexpr double CTL_FAC_MIN = 0.2;
static constexpr double CTL_FAC_MAX = 5.0;
static constexpr double CTL_ERR_FLOOR = 1e-10;

GS_DEVICE double gs_sq(double x) { return x * x; }
GS_DEVICE double gs_max(double a, double b) { return a > b ? a : b; }
GS_DEVICE double gs_min(double a, double b) { return a < b ? a : b; }
// gs_finite is false for NaN and ±Inf (x - x is NaN for both).
GS_DEVICE bool gs_finite(double x) { return x - x == 0; }
