package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// netConf is the plugin's own config, as kube-flannel's cni-conf.json
// writes it.
type netConf struct {
	types.NetConf
	SubnetFile string         `json:"subnetFile"`
	DataDir    string         `json:"dataDir"`
	Delegate   map[string]any `json:"delegate"`
}

func loadConf(stdin []byte) (netConf, error) {
	n := netConf{SubnetFile: "/run/flannel/subnet.env", DataDir: "/var/lib/cni/flannel"}
	if err := json.Unmarshal(stdin, &n); err != nil {
		return n, fmt.Errorf("flannel plugin config: %w", err)
	}
	if n.Delegate == nil {
		n.Delegate = map[string]any{}
	}
	return n, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(n.SubnetFile)
	if err != nil {
		return fmt.Errorf("read flanneld's lease (is flanneld running?): %w", err)
	}
	l, err := parseLease(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", n.SubnetFile, err)
	}
	conf := delegateConf(n.Name, n.CNIVersion, n.Delegate, l)
	typ, ok := conf["type"].(string)
	if !ok || typ == "" {
		return fmt.Errorf("flannel plugin config: delegate.type %v: want a plugin name", conf["type"])
	}
	data, err := json.Marshal(conf)
	if err != nil {
		return fmt.Errorf("delegate config: %w", err)
	}
	// Stored before the delegate runs, so a DEL after a failed ADD still
	// finds what to undo.
	if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
		return fmt.Errorf("delegate config store: %w", err)
	}
	if err := os.WriteFile(filepath.Join(n.DataDir, args.ContainerID), data, 0o600); err != nil {
		return fmt.Errorf("store the delegate config of %s: %w", args.ContainerID, err)
	}
	res, err := invoke.DelegateAdd(context.TODO(), typ, data, nil)
	if err != nil {
		return fmt.Errorf("delegate %s ADD: %w", typ, err)
	}
	return types.PrintResult(res, n.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	path := filepath.Join(n.DataDir, args.ContainerID)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // never added, or already deleted: DEL must be idempotent
	}
	if err != nil {
		return fmt.Errorf("read the delegate config of %s: %w", args.ContainerID, err)
	}
	var conf types.NetConf
	if err := json.Unmarshal(data, &conf); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := invoke.DelegateDel(context.TODO(), conf.Type, data, nil); err != nil {
		return fmt.Errorf("delegate %s DEL: %w", conf.Type, err)
	}
	return os.Remove(path)
}

func cmdCheck(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(n.DataDir, args.ContainerID))
	if err != nil {
		return fmt.Errorf("read the delegate config of %s: %w", args.ContainerID, err)
	}
	var conf types.NetConf
	if err := json.Unmarshal(data, &conf); err != nil {
		return fmt.Errorf("delegate config of %s: %w", args.ContainerID, err)
	}
	return invoke.DelegateCheck(context.TODO(), conf.Type, data, nil)
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck},
		version.All, "flannel (kube-ipvs-proxy lab)")
}
