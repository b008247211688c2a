package manifest

import (
	_ "embed"
	"strings"
	"sync"
)

// builtinKindsFile lists the kinds of Kubernetes' built-in API groups
// (those client-go's scheme registers, their lists and the API
// machinery's own kinds) and of the two APIs every cluster serves
// besides them, one per line. TestBuiltinKindsAreTheAPIGroupsKinds holds
// it to the API packages of the Kubernetes version in go.mod and
// rewrites it with -update; the binary does not link those packages for
// a list of names.
//
//go:embed builtin-kinds.txt
var builtinKindsFile string

// builtinKinds is the set builtinKindsFile lists. An object of another
// kind is a custom resource or a typo (`kind: Servcie`): it is skipped
// with a warning rather than silently.
var builtinKinds = sync.OnceValue(func() map[string]bool {
	kinds := map[string]bool{}
	for _, k := range strings.Fields(builtinKindsFile) {
		kinds[k] = true
	}
	return kinds
})

// unknownKindMessage is the warning for an object whose kind is not
// built in, with the kind we read that it resembles, if any.
func unknownKindMessage(kind string) string {
	msg := "kind " + kind + " is not a built-in Kubernetes kind"
	for known := range knownKinds {
		if strings.EqualFold(kind, known) || editDistance(kind, known) <= 2 {
			msg += " (" + known + "?)"
			break
		}
	}
	return msg + "; skipped"
}

// editDistance is the Levenshtein distance between a and b, bytes as
// letters.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
