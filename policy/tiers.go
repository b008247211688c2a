package policy

import (
	"math"
	"strconv"
	"strings"
)

// spillScale is the weight a tier carrying all traffic shares among its
// ready endpoints.
const spillScale = 10000

// tiering orders a service's endpoints into priority tiers. An endpoint
// belongs to the first tier it matches, or to none.
type tiering struct {
	name   string   // "PreferLocal", "PreferZone" or "topology-keys"
	labels []string // one per tier, for reasons
	tierOf func(c *candidate) int
}

// preferLocal: [this node] → [the rest of this node's zone] → [the rest].
// An empty zone never matches.
func preferLocal(nodeName, zone string) tiering {
	return tiering{
		name:   string(PolicyPreferLocal),
		labels: []string{orNone(nodeName), orNone(zone), wildcardKey},
		tierOf: func(c *candidate) int {
			switch {
			case c.local:
				return 0
			case zone != "" && c.Zone() == zone:
				return 1
			}
			return 2
		},
	}
}

// preferZone: [this node's zone] → [the rest].
func preferZone(zone string) tiering {
	return tiering{
		name:   string(PolicyPreferZone),
		labels: []string{orNone(zone), wildcardKey},
		tierOf: func(c *candidate) int {
			if zone != "" && c.Zone() == zone {
				return 0
			}
			return 1
		},
	}
}

// topologyKeys: tier i holds endpoints whose node has this node's
// (non-empty) value for key i; "*" holds the rest. Endpoints matching no
// key are in no tier.
func topologyKeys(keys []string, self map[string]string, nodeLabels func(string) map[string]string) tiering {
	labels := make([]string, len(keys))
	for i, k := range keys {
		if k == wildcardKey {
			labels[i] = k
		} else {
			labels[i] = k + "=" + orNone(self[k])
		}
	}
	return tiering{
		name:   "topology-keys",
		labels: labels,
		tierOf: func(c *candidate) int {
			theirs := nodeLabels(c.NodeName())
			for i, k := range keys {
				if k == wildcardKey {
					return i
				}
				if v := self[k]; v != "" && theirs[k] == v {
					return i
				}
			}
			return -1
		},
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// tierStats counts one tier's endpoints.
type tierStats struct{ total, ready, nonTerminating int }

// tieredSelection applies t to the candidates. Without spill (factor 0)
// it uses the first tier with a ready endpoint, weight 1. With spill it
// applies the overprovisioning formula across tiers. When no endpoint is
// ready at all, the first tier with a serving-and-terminating endpoint is
// used, weight 1, in both cases.
func tieredSelection(cands []candidate, t tiering, factor float64) selection {
	tiers := make([]int, len(cands))
	stats := make([]tierStats, len(t.labels))
	anyReady := false
	for i := range cands {
		c := &cands[i]
		anyReady = anyReady || c.Ready
		tiers[i] = t.tierOf(c)
		if tiers[i] < 0 {
			continue
		}
		st := &stats[tiers[i]]
		st.total++
		if c.Ready {
			st.ready++
		}
		if !c.Terminating {
			st.nonTerminating++
		}
	}
	switch {
	case len(cands) == 0:
		return selection{nil, t.name + ": no endpoints"}
	case !anyReady:
		return t.firstTier(cands, tiers, func(c *candidate) bool { return c.Serving && c.Terminating },
			"no ready endpoints; ", "serving-terminating")
	case factor == 0:
		return t.firstTier(cands, tiers, func(c *candidate) bool { return c.Ready }, "", "ready")
	}
	return t.spill(cands, tiers, stats, factor)
}

// firstTier picks the first tier holding an endpoint that keep accepts.
func (t tiering) firstTier(cands []candidate, tiers []int, keep func(*candidate) bool, note, what string) selection {
	for tier := range t.labels {
		var dests []Destination
		total := 0
		for i := range cands {
			if tiers[i] != tier {
				continue
			}
			total++
			if keep(&cands[i]) {
				dests = append(dests, cands[i].destination(1))
			}
		}
		if len(dests) > 0 {
			return selection{dests, t.name + ": " + note + t.tierName(tier) + " " +
				strconv.Itoa(len(dests)) + "/" + strconv.Itoa(total) + " " + what}
		}
	}
	return selection{nil, t.name + ": " + note + "no tier has a " + what + " endpoint"}
}

func (t tiering) tierName(i int) string {
	return "tier " + strconv.Itoa(i) + " (" + t.labels[i] + ")"
}

// spill implements priority spill (as in Envoy), exactly:
//
//	health_i = min(1, f·r_i/n_i), or 0 when n_i = 0
//	L_i      = min(health_i, remaining); remaining -= L_i
//	if 0 < ΣL < 1: L_i /= ΣL
//	weight   = max(1, round(10000·L_i/r_i)) for each ready endpoint of a
//	           tier with L_i > 0, rounding half away from zero
//
// where r_i counts ready and n_i non-terminating endpoints of tier i, and
// only tiers with at least one endpoint take part.
func (t tiering) spill(cands []candidate, tiers []int, stats []tierStats, f float64) selection {
	share := make([]float64, len(stats))
	remaining, sum := 1.0, 0.0
	for i, st := range stats {
		if st.total == 0 {
			continue
		}
		health := 0.0
		if st.nonTerminating > 0 {
			health = math.Min(1, f*float64(st.ready)/float64(st.nonTerminating))
		}
		share[i] = math.Min(health, remaining)
		remaining -= share[i]
		sum += share[i]
	}
	if sum > 0 && sum < 1 {
		for i := range share {
			share[i] /= sum
		}
	}
	var dests []Destination
	for i := range cands {
		tier := tiers[i]
		if tier < 0 || share[tier] <= 0 || !cands[i].Ready {
			continue
		}
		w := math.Max(1, math.Round(spillScale*share[tier]/float64(stats[tier].ready)))
		dests = append(dests, cands[i].destination(int32(w)))
	}
	var b strings.Builder
	b.WriteString(t.name)
	b.WriteString(" spill f=")
	b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	b.WriteString(":")
	sep := " "
	for i, st := range stats {
		if st.total == 0 {
			continue
		}
		b.WriteString(sep + t.tierName(i) + " " + strconv.Itoa(st.ready) + "/" + strconv.Itoa(st.total) +
			" ready share " + strconv.FormatFloat(share[i], 'f', 4, 64))
		sep = ", "
	}
	if len(dests) == 0 {
		b.WriteString("; no tier has a ready endpoint")
	}
	return selection{dests, b.String()}
}
