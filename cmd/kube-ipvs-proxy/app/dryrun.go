package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeapi"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/manifest"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// runDryRun prints the plan for the --objects files.
func runDryRun(o *Options, stdout, stderr io.Writer) int {
	plan, warnings, err := DryRun(o)
	for _, w := range warnings {
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
	if err := writePlan(stdout, plan, o.nftConfig(), o.Output); err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: write plan: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// DryRun loads the --objects files and computes this node's plan. The
// warnings name every object that was skipped or worked around.
func DryRun(o *Options) (policy.Plan, []string, error) {
	objs, loadWarnings, err := manifest.LoadPaths(o.Objects)
	var warnings []string
	for _, w := range loadWarnings {
		warnings = append(warnings, w.String())
	}
	if err != nil {
		return policy.Plan{}, warnings, err
	}
	engine, err := policy.New(o.engineConfig())
	if err != nil {
		return policy.Plan{}, warnings, fmt.Errorf("configure engine: %w", err)
	}
	note := func(w fmt.Stringer) { warnings = append(warnings, w.String()) }
	for _, n := range objs.Nodes {
		pn, ws, err := kubeapi.Node(n)
		if err != nil {
			warnings = append(warnings, skipped(err))
			continue
		}
		for _, w := range ws {
			note(w)
		}
		engine.UpsertNode(pn)
	}
	for _, s := range objs.Services {
		ps, err := kubeapi.Service(s, o.ServiceProxyName)
		if errors.Is(err, policy.ErrNotProxied) {
			continue
		}
		if err != nil {
			warnings = append(warnings, skipped(err))
			continue
		}
		if !gateOn(o.Config.FeatureGates, gateAllowServiceExternalIPs, true) {
			ps.ExternalIPs = nil
		}
		for _, w := range engine.UpsertService(ps) {
			note(w)
		}
	}
	for _, s := range objs.EndpointSlices {
		ps, err := kubeapi.EndpointSlice(s)
		if err != nil {
			warnings = append(warnings, skipped(err))
			continue
		}
		if ps != nil {
			engine.UpsertEndpointSlice(ps)
		}
	}
	plan, ws := engine.Compute()
	for _, w := range ws {
		note(w)
	}
	return plan, warnings, nil
}

func skipped(err error) string { return err.Error() + "; skipped" }

// dryRunOutput is the --output json document: the plan, and the
// nftables table that would be programmed for it.
type dryRunOutput struct {
	policy.Plan
	NFTables string `json:"nftables"`
}

func writePlan(w io.Writer, plan policy.Plan, nftCfg nft.Config, format string) error {
	table := nft.Render(nftCfg, plan)
	if format == OutputText {
		if err := plan.WriteText(w); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\nnftables:\n"+table)
		return err
	}
	data, err := json.MarshalIndent(dryRunOutput{plan, table}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}
