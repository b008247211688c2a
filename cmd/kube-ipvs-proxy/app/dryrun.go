package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/manifest"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// runDryRun prints the plan for the --objects files.
func runDryRun(o *Options, stdout, stderr io.Writer) int {
	stop := startProgress(stderr, clock.RealClock{}, progressAfter, progressEvery)
	res, err := DryRun(o)
	stop()
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: %v\n", err)
		var pe *manifest.ParseError
		if errors.As(err, &pe) {
			return ExitUsage
		}
		return ExitError
	}
	if err := res.write(stdout, o.nftConfig(), o.Output); err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: write plan: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// DryRunResult is a dry run's plan, and what explains it.
type DryRunResult struct {
	Plan policy.Plan
	// Warnings name every object that was skipped or worked around,
	// with the file:line it was read at.
	Warnings []string
	// Skipped names each Service not proxied and why (headless,
	// ExternalName, another proxy's, no cluster IP).
	Skipped []string
	// LeftOut explains a virtual server of Plan: its endpoints that are
	// not destinations, and why.
	LeftOut func(*policy.VirtualServer) []policy.LeftOut
}

// write prints the result: the plan in format; in text, with the left
// out endpoints and the skipped Services.
func (r DryRunResult) write(w io.Writer, nftCfg nft.Config, format string) error {
	if format != OutputText {
		return writePlanExplained(w, r.Plan, nftCfg, r.Skipped, r.leftOutList())
	}
	if err := r.Plan.WriteTextExplained(w, r.LeftOut); err != nil {
		return err
	}
	if len(r.Skipped) > 0 {
		text := fmt.Sprintf("\nskipped: %d services\n", len(r.Skipped))
		for _, s := range r.Skipped {
			text += "  " + s + "\n"
		}
		if _, err := io.WriteString(w, text); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\nnftables:\n"+nft.Render(nftCfg, r.Plan))
	return err
}

// DryRun loads the --objects files and computes this node's plan. The
// warnings are returned also with an error.
func DryRun(o *Options) (DryRunResult, error) {
	var res DryRunResult
	var err error
	res.Plan, res.Warnings, err = dryRun(o, &res)
	return res, err
}

func dryRun(o *Options, res *DryRunResult) (policy.Plan, []string, error) {
	objs, loadWarnings, err := manifest.LoadPaths(o.Objects)
	var warnings []string
	for _, w := range loadWarnings {
		warnings = append(warnings, w.String())
	}
	if err != nil {
		return policy.Plan{}, warnings, err
	}
	// at prefixes a message about obj with where obj was read.
	at := func(obj any, msg string) string {
		if src := objs.Source(obj); src != "" {
			return src + ": " + msg
		}
		return msg
	}
	r, err := planSnapshot(o, snapshot{Services: objs.Services, EndpointSlices: objs.EndpointSlices, Nodes: objs.Nodes},
		func(p problem) {
			switch p.Kind {
			case notProxied:
				res.Skipped = append(res.Skipped, p.Err.Error())
			case nodeSkipped, serviceSkipped, sliceSkipped:
				warnings = append(warnings, at(p.Object, skipped(p.Err)))
			case endpointLeftOut:
				warnings = append(warnings, at(p.Object, p.Err.Error()+"; endpoint left out, the slice's others kept"))
			case nodeWarning, engineWarning:
				warnings = append(warnings, at(p.Object, p.Warning.String()))
			}
		})
	if err != nil {
		return policy.Plan{}, warnings, err
	}
	if !r.NodeFound {
		warnings = append(warnings, missingNodeWarning(o.NodeName, objs.Nodes))
	}
	res.LeftOut = r.LeftOut
	return r.Plan, warnings, nil
}

// missingNodeWarning says that no valid Node is the planned node: a
// misspelt --hostname-override would otherwise give another plan
// without a word.
func missingNodeWarning(self string, nodes []*corev1.Node) string {
	known := "no Node is given"
	if len(nodes) > 0 {
		names := make([]string, 0, len(nodes))
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		slices.Sort(names)
		if len(names) > 5 {
			names = append(names[:5], fmt.Sprintf("and %d more", len(names)-5))
		}
		known = "the Nodes given are " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("--hostname-override %s: no valid Node of that name in --objects (%s); "+
		"the node has no labels or addresses: no NodePort virtual servers, no topology", self, known)
}

func skipped(err error) string { return err.Error() + "; skipped" }

// dryRunOutput is the --output json document: the plan, the nftables
// table that would be programmed for it, and, for --objects, what the
// text output explains too: the Services not proxied and each virtual
// server's endpoints that are not its destinations.
type dryRunOutput struct {
	policy.Plan
	NFTables string          `json:"nftables"`
	Skipped  []string        `json:"skipped,omitempty"`
	LeftOut  []leftOutOutput `json:"leftOut,omitempty"`
}

// leftOutOutput is one endpoint a virtual server leaves out, and the rule
// that does.
type leftOutOutput struct {
	VirtualServer string            `json:"virtualServer"`
	Service       policy.ServiceKey `json:"service"`
	Endpoint      string            `json:"endpoint"`
	Rule          string            `json:"rule"`
}

// leftOutList is every virtual server's left-out endpoints, in the plan's
// order.
func (r DryRunResult) leftOutList() []leftOutOutput {
	if r.LeftOut == nil {
		return nil
	}
	var out []leftOutOutput
	for i := range r.Plan.VirtualServers {
		vs := &r.Plan.VirtualServers[i]
		for _, l := range r.LeftOut(vs) {
			out = append(out, leftOutOutput{VirtualServer: vs.Key().String(), Service: vs.Service, Endpoint: l.Endpoint.String(), Rule: l.Rule})
		}
	}
	return out
}

func writePlan(w io.Writer, plan policy.Plan, nftCfg nft.Config, format string) error {
	if format == OutputText {
		if err := plan.WriteText(w); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\nnftables:\n"+nft.Render(nftCfg, plan))
		return err
	}
	return writePlanExplained(w, plan, nftCfg, nil, nil)
}

// writePlanExplained writes the --output json document.
func writePlanExplained(w io.Writer, plan policy.Plan, nftCfg nft.Config, skipped []string, leftOut []leftOutOutput) error {
	data, err := json.MarshalIndent(dryRunOutput{plan, nft.Render(nftCfg, plan), skipped, leftOut}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}
