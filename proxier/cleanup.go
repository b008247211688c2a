package proxier

import (
	"errors"
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Removed is what a cleanup removed, or would remove.
type Removed struct {
	// VirtualServers are our IPVS virtual servers, sorted.
	VirtualServers []policy.VirtualServerKey
	// Interface is the dummy interface ("kube-ipvs0"); "" if it did not
	// exist.
	Interface string
	// Table is our nftables table ("inet kube-ipvs-proxy"); "" if it did
	// not exist.
	Table string
}

// Lines lists r, one object a line, for an operator: "ipvs virtual
// server 10.96.0.10:80/TCP", "interface kube-ipvs0", "nftables table
// inet kube-ipvs-proxy".
func (r Removed) Lines() []string {
	var out []string
	for _, k := range r.VirtualServers {
		out = append(out, "ipvs virtual server "+k.String())
	}
	if r.Interface != "" {
		out = append(out, "interface "+r.Interface)
	}
	if r.Table != "" {
		out = append(out, "nftables table "+r.Table)
	}
	return out
}

// Cleanup removes our virtual servers, our dummy interface and our
// nftables table, and nothing foreign. It works in a fresh process
// (--cleanup): the NodePort virtual servers, which sit on node addresses
// among possibly foreign ones, are known from the table's record
// (nft.Writer.RecordedNodePorts), read before anything is deleted;
// without a table or record none are deleted, as before there was one.
//
// The table is the record, so it is deleted only once the IPVS cleanup
// succeeded; if reading the record or deleting a virtual server fails,
// the table stays, the error is returned, and running Cleanup again
// finishes the job.
func (d *DataPlane) Cleanup() error {
	_, err := d.Clean(false)
	return err
}

// Clean is Cleanup returning what it removed, also on error. With dryRun
// it reads the kernel, changes nothing, and returns what Cleanup would
// remove (--cleanup --dry-run).
func (d *DataPlane) Clean(dryRun bool) (Removed, error) {
	var r Removed
	table := "inet " + nft.TableName
	recorded, err := d.nft.RecordedNodePorts()
	if err != nil {
		ierr := d.clean(&r, dryRun)
		return r, errors.Join(fmt.Errorf("nftables: read recorded NodePort virtual servers (table %s kept): %w", table, err),
			wrap("ipvs", ierr))
	}
	exists, err := d.nft.TableExists()
	if err != nil {
		return r, fmt.Errorf("nftables: %w", err)
	}
	d.ipvs.AdoptRecorded(recorded)
	if err := d.clean(&r, dryRun); err != nil {
		if len(recorded) > 0 {
			return r, fmt.Errorf("ipvs (table %s kept: it records NodePort virtual servers still to delete): %w", table, err)
		}
		return r, errors.Join(wrap("ipvs", err), d.cleanTable(&r, exists, dryRun))
	}
	return r, d.cleanTable(&r, exists, dryRun)
}

// CleanTable removes our nftables table only, and returns what it
// removed: after a rollback to kube-proxy, which owns the IPVS virtual
// servers and kube-ipvs0 again (--cleanup --cleanup-table-only). With
// dryRun it changes nothing.
func (d *DataPlane) CleanTable(dryRun bool) (Removed, error) {
	var r Removed
	exists, err := d.nft.TableExists()
	if err != nil {
		return r, fmt.Errorf("nftables: %w", err)
	}
	return r, d.cleanTable(&r, exists, dryRun)
}

// clean runs the IPVS writer's cleanup into r.
func (d *DataPlane) clean(r *Removed, dryRun bool) error {
	removed, err := d.ipvs.Clean(dryRun)
	r.VirtualServers, r.Interface = removed.VirtualServers, removed.Link
	return err
}

// cleanTable deletes our table, recording it in r if it existed.
func (d *DataPlane) cleanTable(r *Removed, exists, dryRun bool) error {
	if !dryRun {
		if err := d.nft.Cleanup(); err != nil {
			return wrap("nftables", err)
		}
	}
	if exists {
		r.Table = "inet " + nft.TableName
	}
	return nil
}
