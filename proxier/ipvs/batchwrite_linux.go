package ipvs

// Write implements Kernel.Write for the Linux adapter (kernel_linux.go):
// the changes go out in batches, through its opWriter.
func (m *netlinkKernel) Write(ops []Op) []error {
	if len(ops) == 0 {
		return nil
	}
	return m.ops.write(ops)
}

// opWriter makes Kernel.Write's changes in batches (batchSender) on a
// generic netlink socket of its own (ipvsmsg.go says why not through
// moby/ipvs).
type opWriter struct {
	b      *batchSender
	family uint16
}

func newOpWriter() (*opWriter, error) {
	s, id, err := openIPVSSocket()
	if err != nil {
		return nil, err
	}
	b, err := newBatchSender(s, "ipvs write")
	if err != nil {
		return nil, err
	}
	return &opWriter{b: b, family: id}, nil
}

// write implements Kernel.Write.
func (w *opWriter) write(ops []Op) []error {
	errs := make([]error, len(ops))
	reqs := make([]request, 0, len(ops))
	var index []int // reqs[j] is ops[index[j]]
	for i, o := range ops {
		body, err := encodeOp(o)
		if err != nil {
			errs[i] = err
			continue
		}
		reqs, index = append(reqs, request{typ: w.family, body: body}), append(index, i)
	}
	w.b.sendAll(reqs, index, errs)
	return errs
}

func (w *opWriter) Close() { w.b.Close() }
