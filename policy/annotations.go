package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Service annotations owned by kube-ipvs-proxy.
const (
	AnnotationPrefix         = "kube-ipvs-proxy.io/"
	AnnotationTrafficPolicy  = AnnotationPrefix + "traffic-policy"
	AnnotationTopologyKeys   = AnnotationPrefix + "topology-keys"
	AnnotationOverprovision  = AnnotationPrefix + "overprovisioning-factor"
	AnnotationScheduler      = AnnotationPrefix + "scheduler"
	AnnotationSchedulerFlags = AnnotationPrefix + "scheduler-flags"
	AnnotationNoTrack        = AnnotationPrefix + "notrack"
)

// Schedulers lists the IPVS schedulers a service may ask for.
var Schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh", "fo", "ovf"}

// schedulerFlags maps each scheduler to the IPVS flags it understands.
var schedulerFlags = map[string][]string{
	"mh": {"mh-fallback", "mh-port"},
	"sh": {"sh-fallback", "sh-port"},
}

// defaultSchedulerFlags are the flags kube-proxy sets on every virtual
// server when --ipvs-scheduler names the scheduler: with mh it hashes on
// the source port as well as the source address, so that clients behind
// one SNAT address spread over the backends. The scheduler-flags
// annotation replaces them.
var defaultSchedulerFlags = map[string][]string{
	"mh": {"mh-port"},
}

// DefaultScheduler is used when neither --ipvs-scheduler nor the
// annotation says otherwise, as in kube-proxy.
const DefaultScheduler = "rr"

// wildcardKey is the topology key that matches every endpoint.
const wildcardKey = "*"

// settings is what a Service's kube-ipvs-proxy.io annotations ask for,
// after validation.
type settings struct {
	tiering   TrafficPolicy // "", PreferLocal, PreferZone or TopologyKeys
	keys      []string      // topology keys, when tiering is TopologyKeys
	factor    float64       // overprovisioning factor; 0 means no spill
	scheduler string
	flags     []string
	noTrack   bool
}

// IsScheduler reports whether name is a valid IPVS scheduler.
func IsScheduler(name string) bool { return slices.Contains(Schedulers, name) }

// IsSchedulerName reports whether name can name a kernel IPVS scheduler
// (1 to 15 lowercase letters, digits or _; IP_VS_SCHEDNAME_MAXLEN is 16
// with the NUL). kube-proxy takes any --ipvs-scheduler and lets the
// kernel decide at start; the proxy checks the kernel at start too
// (ipvs.Writer.CheckScheduler), so a scheduler newer than Schedulers
// ("twos") or "none" is not refused here.
func IsSchedulerName(name string) bool {
	if name == "" || len(name) > 15 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func annotationField(name string) string { return "metadata.annotations[" + name + "]" }

// parseSettings reads the annotations. Bad values are warned about and
// fall back to the default; they never make the Service invalid.
func parseSettings(obj string, ann map[string]string, internalLocal bool, defaultScheduler string) (settings, []Warning) {
	st := settings{scheduler: defaultScheduler}
	var ws []Warning
	warn := func(name, format string, args ...any) {
		ws = append(ws, Warning{Object: obj, Field: annotationField(name), Message: fmt.Sprintf(format, args...)})
	}
	for _, name := range sortedKeys(ann) {
		if strings.HasPrefix(name, AnnotationPrefix) && !knownAnnotation(name) {
			warn(name, "unknown annotation; ignored")
		}
	}
	if v, ok := ann[AnnotationTrafficPolicy]; ok {
		switch TrafficPolicy(v) {
		case PolicyPreferLocal, PolicyPreferZone:
			st.tiering = TrafficPolicy(v)
		default:
			warn(AnnotationTrafficPolicy, "unknown value %s (want PreferLocal or PreferZone); ignored", Quoted(v))
		}
	}
	if v, ok := ann[AnnotationTopologyKeys]; ok {
		keys, err := parseTopologyKeys(v)
		switch {
		case err != nil:
			warn(AnnotationTopologyKeys, "%v; ignored", err)
		case st.tiering != "":
			warn(AnnotationTrafficPolicy, "%s is also set and wins; traffic-policy %s ignored", AnnotationTopologyKeys, st.tiering)
			fallthrough
		default:
			st.tiering, st.keys = PolicyTopologyKeys, keys
		}
	}
	if internalLocal && st.tiering != "" {
		warn(tieringAnnotation(st.tiering), "internalTrafficPolicy Local overrides %s; ignored", st.tiering)
		st.tiering, st.keys = "", nil
	}
	if v, ok := ann[AnnotationOverprovision]; ok {
		f, err := parseDecimal(v)
		switch {
		case err != nil || f < 1 || f > 100:
			warn(AnnotationOverprovision, "invalid value %s (want a decimal from 1 to 100); no spill", Quoted(v))
		case st.tiering == "":
			warn(AnnotationOverprovision, "applies only with a tiered traffic-policy or topology-keys; ignored")
		default:
			st.factor = f
		}
	}
	if v, ok := ann[AnnotationScheduler]; ok {
		if IsScheduler(v) {
			st.scheduler = v
		} else {
			warn(AnnotationScheduler, "unknown scheduler %s; using %s", Quoted(v), defaultScheduler)
		}
	}
	if v, ok := ann[AnnotationSchedulerFlags]; ok {
		st.flags, ws = parseSchedulerFlags(obj, v, st.scheduler, ws)
	} else if st.scheduler == defaultScheduler {
		st.flags = slices.Clone(defaultSchedulerFlags[defaultScheduler])
	}
	if v, ok := ann[AnnotationNoTrack]; ok {
		// Exactly the two words the message names: strconv.ParseBool
		// would also take "1", "t" and "TRUE".
		switch v {
		case "true", "false":
			st.noTrack = v == "true"
		default:
			warn(AnnotationNoTrack, "invalid value %s (want true or false); tracked", Quoted(v))
		}
	}
	return st, ws
}

// parseDecimal reads a plain decimal number, digits with an optional
// fraction ("2", "1.5"), the one syntax numeric annotations take:
// strconv.ParseFloat alone would also take "1_0", "1e1", "+2", "Inf" and
// "NaN".
func parseDecimal(v string) (float64, error) {
	intPart, frac, hasFrac := strings.Cut(v, ".")
	if !allDigits(intPart) || (hasFrac && !allDigits(frac)) {
		return 0, fmt.Errorf("%s is not a plain decimal number", Quoted(v))
	}
	return strconv.ParseFloat(v, 64)
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func knownAnnotation(name string) bool {
	switch name {
	case AnnotationTrafficPolicy, AnnotationTopologyKeys, AnnotationOverprovision,
		AnnotationScheduler, AnnotationSchedulerFlags, AnnotationNoTrack:
		return true
	}
	return false
}

func tieringAnnotation(p TrafficPolicy) string {
	if p == PolicyTopologyKeys {
		return AnnotationTopologyKeys
	}
	return AnnotationTrafficPolicy
}

// parseTopologyKeys parses "k1,k2,*". Keys are label names; "*" may only
// come last; a key may not repeat.
func parseTopologyKeys(v string) ([]string, error) {
	parts := strings.Split(v, ",")
	keys := make([]string, 0, len(parts))
	for i, p := range parts {
		k := strings.TrimSpace(p)
		switch {
		case k == "":
			return nil, fmt.Errorf("empty key at position %d", i+1)
		case k == wildcardKey && i != len(parts)-1:
			return nil, fmt.Errorf("%q must be the last key", wildcardKey)
		case slices.Contains(keys, k):
			return nil, fmt.Errorf("duplicate key %s", Quoted(k))
		case k != wildcardKey:
			if !isLabelKey(k) {
				return nil, fmt.Errorf("invalid label key %s", Quoted(k))
			}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func parseSchedulerFlags(obj, v, scheduler string, ws []Warning) ([]string, []Warning) {
	field := annotationField(AnnotationSchedulerFlags)
	allowed := schedulerFlags[scheduler]
	var flags []string
	for _, p := range strings.Split(v, ",") {
		f := strings.TrimSpace(p)
		switch {
		case f == "":
		case !slices.Contains(allowed, f):
			ws = append(ws, Warning{Object: obj, Field: field, Message: fmt.Sprintf("flag %s does not apply to scheduler %s; ignored", Quoted(f), scheduler)})
		case !slices.Contains(flags, f):
			flags = append(flags, f)
		}
	}
	slices.Sort(flags)
	return flags, ws
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isLabelKey reports whether k is a valid label key: an optional DNS
// subdomain prefix and "/", then a name of at most 63 characters.
func isLabelKey(k string) bool {
	name := k
	if i := strings.LastIndexByte(k, '/'); i >= 0 {
		prefix := k[:i]
		name = k[i+1:]
		if prefix == "" || len(prefix) > 253 || !isLabelPart(prefix, ".-") {
			return false
		}
	}
	return len(name) <= 63 && isLabelPart(name, "-_.")
}

// isLabelPart reports whether s is non-empty, starts and ends with an
// alphanumeric, and otherwise holds alphanumerics and the given runes.
func isLabelPart(s, inner string) bool {
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !alnum(s[i]) && strings.IndexByte(inner, s[i]) < 0 {
			return false
		}
	}
	return true
}
