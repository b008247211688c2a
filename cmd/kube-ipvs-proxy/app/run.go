package app

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// Run runs the mode the options select and returns the exit code. As in
// kube-proxy, --write-config-to comes first, then --cleanup, then
// --init-only; then ours: --preflight, then --dry-run.
func Run(ctx context.Context, o *Options, stdout, stderr io.Writer) int {
	switch {
	case o.Version != "false":
		printVersion(stdout, o.Version)
		return ExitOK
	case o.WriteConfigTo != "":
		return writeConfig(o, stderr)
	case o.Cleanup:
		return runCleanup(o, stderr)
	case o.InitOnly:
		return runInitOnly(ctx, o, stderr, hostInit)
	case o.Preflight:
		return Preflight(ctx, o, os.DirFS("/"), HostForward{}, stdout, stderr)
	case o.DryRun && len(o.Objects) > 0:
		return runDryRun(o, stdout, stderr)
	case o.DryRun:
		setupLogging(o, stderr)
		return exitCode(Watch(ctx, o, openNop, stdout), stderr)
	default:
		setupLogging(o, stderr)
		// The data plane's configuration is read when Watch opens it:
		// with detectLocalMode NodeCIDR, Watch has the Node's podCIDRs
		// by then.
		open := func() (proxier.DataPlaneWriter, func(), error) { return openKernel(o.RunConfig().DataPlane)() }
		return exitCode(Watch(ctx, o, open, stdout), stderr)
	}
}

func exitCode(err error, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// writeConfig writes the effective configuration to --write-config-to.
func writeConfig(o *Options, stderr io.Writer) int {
	data, err := MarshalConfig(o.Config)
	if err == nil {
		var own []byte
		own, err = MarshalOwnConfig(o.ownConfig())
		data = append(append(data, "---\n"...), own...)
	}
	if err == nil {
		err = os.WriteFile(o.WriteConfigTo, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: --write-config-to: %v\n", err)
		return ExitError
	}
	fmt.Fprintf(stderr, "kube-ipvs-proxy: wrote the configuration to %s\n", o.WriteConfigTo)
	return ExitOK
}
