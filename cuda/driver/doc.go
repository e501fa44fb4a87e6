// Package driver binds the CUDA driver API and NVRTC for package cuda's
// engine and for hand-written kernels (bench's baselines).
//
// Nothing is linked at build time: libcuda.so.1 and libnvrtc.so.{13,12,...}
// are loaded at run time through purego, their entry points resolved with
// cuGetProcAddress at explicit ABI versions, so CGO_ENABLED=0 builds work on
// machines without CUDA. Without a driver, DeviceCount and Open return an
// error wrapping ErrNoGPU; without NVRTC, Compile returns one wrapping
// ErrNoNVRTC.
//
// A Device owns one context and one goroutine locked to an OS thread; every
// driver call of the device runs there (Device.Do), so a context is never
// used from a migrated goroutine. Buffer is typed device memory; Module,
// Kernel, Stream and Event wrap their driver objects; Device.HostAlloc
// gives page-locked host memory for staging copies.
//
// Compile compiles CUDA C++ with NVRTC for a device's own architecture (a
// cubin where the NVRTC supports it, else PTX), with --fmad=false unless
// CompileSettings.FMA, so device arithmetic rounds as written. Results are
// cached on disk under a hash of the source, options, target and NVRTC
// version: in $GRADSOLVE_CUDA_CACHE if set ("off" disables the cache), else
// in os.UserCacheDir()/gradsolve/cuda. An entry carries hashes of its key
// and its data, checked before loading; a damaged one is rebuilt with a
// warning on standard error, and entries are written through a synced
// temporary file renamed into place, so processes may share the folder.
// Compiling a large program takes NVRTC seconds; a cache hit costs a file
// read.
//
// A large program may be compiled in parts (Device.BuildUnits): its
// translation units compiled concurrently as relocatable device code
// (CompileUnits: NVRTC's -rdc=true, each unit cached on its own key),
// linked by the driver's linker (Device.Link: cuLinkCreate, cuLinkAddData,
// cuLinkComplete) and loaded; the linked image is cached under a key of
// the units' keys, the architecture and the driver's version. A unit that
// fails to compile is named in the error (*UnitError). Every unit is
// compiled with the same settings (architecture and options): the
// linker refuses a kernel that calls a function of another unit compiled
// to use more registers than the kernel may (a kernel's launch bounds
// and --maxrregcount cap its own unit only), so a program whose kernel
// is register-capped gives every unit that cap (--maxrregcount) and its
// kernel no launch bounds; Link refuses images of different targets or
// caps (*LinkError) and passes the cap to the driver's compile of PTX.
package driver
