package results

import "slices"

// Waited summarises, over proxy's runs at the scale that stopped waiting
// for its own first sync, how long after its table was complete each
// stopped: its first sync's lower bound less its table complete. The
// files do not hold the wait itself (KIP_BENCH_SCALE_FIRST_SYNC_WAIT);
// the harness stops at its first reading of /metrics past it, a second
// apart, so this is the wait plus less than that. N 0: no run stopped.
func (s Scale) Waited(proxy string) Stat {
	return s.summarise(proxy, func(r Run) (float64, bool) {
		bound, ok := r.value(OwnFirstSyncNotYet)
		table, ok2 := r.value(TableComplete)
		return bound - table, ok && ok2
	})
}

// TableWaited summarises, over proxy's runs at the scale that stopped
// waiting for its table (KIP_BENCH_SCALE_TABLE_WAIT), how long after its
// start each stopped. N 0: no run stopped.
func (s Scale) TableWaited(proxy string) Stat {
	return s.summarise(proxy, func(r Run) (float64, bool) { return r.value(TableNotYet) })
}

// summarise is the Stat, in seconds, of what of gives for each of
// proxy's runs that has it.
func (s Scale) summarise(proxy string, of func(Run) (float64, bool)) Stat {
	var st Stat
	var vs []float64
	for _, r := range s.Runs {
		if r.Proxy != proxy {
			continue
		}
		st.Runs++
		if v, ok := of(r); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return Stat{Runs: st.Runs}
	}
	st.N, st.Unit = len(vs), "s"
	st.Median = Median(vs)
	st.Min, st.Max = slices.Min(vs), slices.Max(vs)
	return st
}

// Earlier is, for a measurement of proxy, the newest of s.Older that has
// it at the same number of services in every round that has it, without
// a lower bound: that scale with its file, and the Stat there. It is for
// citing beside what s lacks, as another run, never for pooling.
func (s Selected) Earlier(proxy, name string) (Selected, Stat, bool) {
	for _, f := range s.Older {
		for _, sc := range f.Report.Scales {
			if sc.Services != s.Services {
				continue
			}
			if st := sc.Stat(proxy, name); st.N > 0 && !st.LowerBound() {
				return Selected{Scale: sc, From: f}, st, true
			}
		}
	}
	return Selected{}, Stat{}, false
}

// has says whether the run reports the measurement.
func (r Run) has(name string) bool {
	_, ok := r.value(name)
	return ok
}

// value is the run's measurement of that name, if it has one.
func (r Run) value(name string) (float64, bool) {
	for _, m := range r.Measurements {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}
