package ipvs

import "fmt"

// WriteEach makes the changes ops one at a time through k's
// single-change methods: Kernel.Write for a kernel that has no batched
// path (the fakes), and the one-request-per-op baseline that the batched
// path is measured against.
func WriteEach(k Kernel, ops []Op) []error {
	errs := make([]error, len(ops))
	for i, o := range ops {
		errs[i] = writeOne(k, o)
	}
	return errs
}

func writeOne(k Kernel, o Op) error {
	switch o.Kind {
	case OpAddService:
		return k.AddVirtualServer(o.VS)
	case OpUpdateService:
		return k.UpdateVirtualServer(o.VS)
	case OpDeleteService:
		return k.DeleteVirtualServer(o.VS.Key)
	case OpAddDestination:
		return k.AddDestination(o.VS.Key, o.Dest)
	case OpUpdateDestination:
		return k.UpdateDestination(o.VS.Key, o.Dest)
	case OpDeleteDestination:
		return k.DeleteDestination(o.VS.Key, o.Dest)
	}
	return fmt.Errorf("%s: unknown op kind", o)
}
