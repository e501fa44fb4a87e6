package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Programs in parts: a program too large to compile quickly as one
// translation unit is compiled as several units of relocatable device
// code (NVRTC's -rdc=true), concurrently, and the images linked by the
// driver's linker (cuLinkCreate, cuLinkAddData, cuLinkComplete) into one
// image, which Load loads as any other. The units are compiled alike
// (one architecture, one set of options): see Link for what the linker
// refuses.

// JIT input types of cuLinkAddData (CUjitInputType).
const (
	jitInputCubin = 0 // CU_JIT_INPUT_CUBIN
	jitInputPTX   = 1 // CU_JIT_INPUT_PTX
)

// jitMaxRegisters is CU_JIT_MAX_REGISTERS, the JIT option that caps the
// registers of the functions the driver compiles from PTX.
const jitMaxRegisters = 0

// rdcOption makes NVRTC compile relocatable device code: a unit's
// external functions may be defined in another unit, resolved at link.
const rdcOption = "-rdc=true"

// Unit is one translation unit of a program compiled in parts
// (CompileUnits, Device.BuildUnits).
type Unit struct {
	// Name names the unit in compiler messages and errors, and its
	// cache entry: as "kernel" or the function the unit defines.
	Name   string
	Source string // CUDA C++
}

// UnitError is the failure of one unit of a program compiled in parts.
type UnitError struct {
	Unit         string // the unit's Name
	Index, Count int    // its index among the program's Count units
	Err          error  // the compile's error (a *CompileError)
}

func (e *UnitError) Error() string {
	return fmt.Sprintf("cuda: unit %d of %d (%s): %v", e.Index+1, e.Count, e.Unit, e.Err)
}

// Unwrap returns the compile's error.
func (e *UnitError) Unwrap() error { return e.Err }

// unitSettings returns the settings of unit u of a program compiled in
// parts with settings s: relocatable device code, named after the unit.
func unitSettings(u Unit, s *CompileSettings) *CompileSettings {
	us := *s
	us.Name = unitName(s.Name, u.Name)
	us.Options = append(append([]string(nil), s.Options...), rdcOption)
	return &us
}

// unitName returns the NVRTC program name of unit unit of the program
// called program ("" means "gradsolve.cu"): "gradsolve.unit.cu".
func unitName(program, unit string) string {
	if program == "" {
		program = "gradsolve.cu"
	}
	base := strings.TrimSuffix(program, ".cu")
	return base + "." + unit + ".cu"
}

// CompileUnits compiles each unit as relocatable device code (Compile,
// with -rdc=true added to s.Options; each unit cached on its own key) for
// a device of architecture arch, at most GOMAXPROCS at a time (NVRTC 12
// and later compile concurrently), and returns their images in order.
// Its error is the first failed unit's (in order), a *UnitError naming
// it. Link the images with Device.Link.
func CompileUnits(units []Unit, arch Arch, s *CompileSettings) ([]*Image, error) {
	if s == nil {
		s = &CompileSettings{}
	}
	if len(units) == 0 {
		return nil, fmt.Errorf("cuda: CompileUnits: no units")
	}
	imgs := make([]*Image, len(units))
	errs := make([]error, len(units))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for k, u := range units {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			imgs[k], errs[k] = Compile(u.Source, arch, unitSettings(u, s))
		}()
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			return nil, &UnitError{Unit: units[k].Name, Index: k, Count: len(units), Err: err}
		}
	}
	return imgs, nil
}

// linkKey hashes what a linked image depends on: the units' images' keys
// (each hashes its source, options, target and NVRTC's version), the
// device's architecture and the driver's version, whose linker links them.
func linkKey(unitKeys []string, arch Arch, driverVersion int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00link\x00%s\x00driver %d\x00", cacheFormat, arch, driverVersion)
	for _, k := range unitKeys {
		fmt.Fprintf(h, "%s\x00", k)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// linkedImage returns the image BuildUnits makes of units, without its
// data: its target, the options of its units and its cache key, and the
// name of its cache entry.
func (d *Device) linkedImage(l *nvrtc, units []Unit, s *CompileSettings) (*Image, string) {
	keys := make([]string, len(units))
	var opts []string
	for k, u := range units {
		img, _, _ := l.image(u.Source, d.info.Arch, unitSettings(u, s))
		keys[k], opts = img.Key, img.Options
	}
	img := &Image{Target: d.info.Arch.String(), Options: opts, Key: linkKey(keys, d.info.Arch, d.drv.version)}
	return img, unitName(s.Name, "linked")
}

// CachedUnits reports whether BuildUnits(units, s) would find its linked
// image in the disk cache, as Cached does for one unit: false where the
// cache is off, s.NoCache is set or NVRTC is not found. It costs a hash
// of the sources and a stat.
func (d *Device) CachedUnits(units []Unit, s *CompileSettings) bool {
	return cachedEntry(s, func(l *nvrtc, s *CompileSettings) (*Image, string) { return d.linkedImage(l, units, s) })
}

// BuildUnits compiles the units of one program (CompileUnits), links
// them (Link) and loads the result (Load). The linked image is cached on
// disk as Compile's images are, under a key of the units' keys, the
// architecture and the driver's version: a hit reads one file and
// compiles nothing (nor reads the units' entries). The units' images
// are cached each on its own key, so a program one unit of which changed
// compiles that unit only. Every unit is compiled with s (its options,
// and -rdc=true): a register cap (--maxrregcount) that a kernel needs
// must be in s.Options, for its callees in the other units. On failure
// the error names the failed unit (*UnitError) or the link.
func (d *Device) BuildUnits(units []Unit, s *CompileSettings) (*Module, *Image, error) {
	if s == nil {
		s = &CompileSettings{}
	}
	l, err := loadNVRTC()
	if err != nil {
		return nil, nil, err
	}
	img, name := d.linkedImage(l, units, s)
	if cache, ok := fromCache(s, name, img); !ok {
		imgs, err := CompileUnits(units, d.info.Arch, s)
		if err != nil {
			return nil, nil, err
		}
		linked, err := d.Link(imgs)
		if err != nil {
			return nil, nil, err
		}
		img.Data, img.Log = linked.Data, linked.Log
		cacheWrite(cache, name, img)
	}
	m, err := d.Load(img)
	return m, img, err
}

// regCap returns the register cap that NVRTC options opts give
// (--maxrregcount=N or -maxrregcount=N; the last one), 0 for none.
func regCap(opts []string) int {
	n := 0
	for _, o := range opts {
		for _, p := range []string{"--maxrregcount=", "-maxrregcount="} {
			if v, ok := strings.CutPrefix(o, p); ok {
				if k, err := strconv.Atoi(v); err == nil {
					n = k
				}
			}
		}
	}
	return n
}

// LinkError is a set of images that Link refuses before the driver's
// linker sees them.
type LinkError struct {
	Index int    // the image that differs from the first, or is empty
	Why   string // how
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("cuda: Link: image %d %s", e.Index, e.Why)
}

// linkable checks that imgs may be linked into one image: each holds
// code, and all were compiled for one target with one register cap
// (regCap of their options: the linker refuses a kernel that calls a
// function of another image compiled to use more registers than the
// kernel may; a kernel's launch bounds and --maxrregcount apply to its
// own image only). It returns that cap.
func linkable(imgs []*Image) (int, error) {
	if len(imgs) == 0 {
		return 0, fmt.Errorf("cuda: Link: no images")
	}
	regs := regCap(imgs[0].Options)
	for k, img := range imgs {
		switch r := regCap(img.Options); {
		case len(img.Data) == 0:
			return 0, &LinkError{Index: k, Why: "is empty"}
		case img.Target != imgs[0].Target:
			return 0, &LinkError{Index: k, Why: fmt.Sprintf("is for %s, image 0 for %s", img.Target, imgs[0].Target)}
		case r != regs:
			return 0, &LinkError{Index: k, Why: fmt.Sprintf("has a register cap of %d, image 0 of %d", r, regs)}
		}
	}
	return regs, nil
}

// Link links images of relocatable device code (CompileUnits: cubins,
// or PTX, which the driver compiles first, with their register cap:
// CU_JIT_MAX_REGISTERS) with the driver's linker and returns the linked
// cubin (Image.Log holds the linker's messages). The images must be of
// one target and one register cap (--maxrregcount), else it returns a
// *LinkError without calling the driver. Its error holds the linker's
// error log (an undefined or twice-defined function, a callee that may
// use more registers than its kernel, say); it fails with an *Error if
// the driver has no linker.
func (d *Device) Link(imgs []*Image) (*Image, error) {
	drv := d.drv
	if drv.cuLinkCreate == nil || drv.cuLinkAddData == nil || drv.cuLinkComplete == nil || drv.cuLinkDestroy == nil {
		return nil, &Error{Call: "cuLinkCreate", Name: "CUDA_ERROR_NOT_SUPPORTED", Desc: "the driver has no linker entry points"}
	}
	regs, err := linkable(imgs)
	if err != nil {
		return nil, err
	}
	ptx := false
	for _, img := range imgs {
		ptx = ptx || img.PTX
	}
	out := &Image{Target: d.info.Arch.String()}
	errLog := make([]byte, 16<<10)
	infoLog := make([]byte, 16<<10)
	err = d.do(func() error {
		var pin runtime.Pinner
		defer pin.Unpin()
		pin.Pin(&errLog[0])
		pin.Pin(&infoLog[0])
		opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize, jitInfoLogBuffer, jitInfoLogBufferSize}
		vals := []uintptr{uintptr(unsafe.Pointer(&errLog[0])), uintptr(len(errLog)), uintptr(unsafe.Pointer(&infoLog[0])), uintptr(len(infoLog))}
		if ptx && regs > 0 {
			opts, vals = append(opts, jitMaxRegisters), append(vals, uintptr(regs))
		}
		pin.Pin(&opts[0])
		pin.Pin(&vals[0])
		var state uintptr
		if err := drv.check("cuLinkCreate", drv.cuLinkCreate(uint32(len(opts)), &opts[0], (*unsafe.Pointer)(unsafe.Pointer(&vals[0])), &state)); err != nil {
			return err
		}
		defer drv.cuLinkDestroy(state)
		for k, img := range imgs {
			data, typ := img.Data, int32(jitInputCubin)
			if img.PTX {
				typ = jitInputPTX
				if len(data) == 0 || data[len(data)-1] != 0 {
					data = append(append([]byte(nil), data...), 0)
				}
			}
			pin.Pin(&data[0])
			name := cstring(fmt.Sprintf("unit%d", k))
			pin.Pin(name)
			if err := drv.check("cuLinkAddData", drv.cuLinkAddData(state, typ, unsafe.Pointer(&data[0]), uint64(len(data)), name, 0, nil, nil)); err != nil {
				return fmt.Errorf("%w (image %d, target %s)", err, k, img.Target)
			}
		}
		var cubin unsafe.Pointer
		var size uint64
		if err := drv.check("cuLinkComplete", drv.cuLinkComplete(state, &cubin, &size)); err != nil {
			return err
		}
		if cubin == nil || size == 0 {
			return fmt.Errorf("cuda: cuLinkComplete returned an empty image")
		}
		// The image belongs to the link state: copy it before the state
		// is destroyed.
		out.Data = append([]byte(nil), unsafe.Slice((*byte)(cubin), size)...)
		return nil
	})
	out.Log = strings.TrimSpace(string(infoLog[:clen(infoLog)]))
	if err != nil {
		if s := strings.TrimSpace(string(errLog[:clen(errLog)])); s != "" {
			err = fmt.Errorf("%w\n%s", err, s)
		}
		return nil, err
	}
	return out, nil
}
