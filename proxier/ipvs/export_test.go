package ipvs

import "github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/wholerepair"

// Repair makes a whole Repair at once, for this package's tests and
// benchmarks: the loop repairs in slices (StartRepair, RepairStep).
func (w *Writer) Repair() error { return wholerepair.Run(w) }
