package app

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The --config file's optional second document: kube-ipvs-proxy's own
// settings, the ones kube-proxy has no field for. kube-proxy reads only a
// file's first YAML document, so a ConfigMap holding KubeProxyConfiguration
// first and this second can serve both proxies.
const (
	OwnConfigAPIVersion = "kube-ipvs-proxy.io/v1alpha1"
	OwnConfigKind       = "KubeIPVSProxyConfiguration"
)

// OwnConfiguration is kube-ipvs-proxy's own settings as a --config
// document. Each field is a flag of the same meaning (ownField lists
// them); a flag given on the command line wins over the field, as
// --hostname-override wins over hostnameOverride.
type OwnConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	ServiceProxyName             string           `json:"serviceProxyName"`
	NoTrackServices              []string         `json:"notrackServices"`
	RefuseNodeAddressExternalIPs bool             `json:"refuseNodeAddressExternalIPs"`
	MaxVirtualServersPerService  int              `json:"maxVirtualServersPerService"`
	MaxVirtualServersPerNode     int              `json:"maxVirtualServersPerNode"`
	IPVSInterface                string           `json:"ipvsInterface"`
	IPVSGracefulPeriod           *metav1.Duration `json:"ipvsGracefulPeriod"`
}

// ownField is one field of OwnConfiguration: its JSON name, its flag,
// and how a decoded value is set on Options.
type ownField struct {
	name, flag string
	set        func(o *Options, v any) error
}

var ownFields = []ownField{
	{"serviceProxyName", "service-proxy-name", func(o *Options, v any) error { return setString(&o.ServiceProxyName, v) }},
	{"notrackServices", "notrack-services", func(o *Options, v any) error { return setStrings(&o.NoTrackServices, v) }},
	{"refuseNodeAddressExternalIPs", "refuse-node-address-external-ips", func(o *Options, v any) error {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("want a boolean, got %s", jsonKind(v))
		}
		o.RefuseNodeAddressExternalIPs = b
		return nil
	}},
	{"maxVirtualServersPerService", "max-virtual-servers-per-service", func(o *Options, v any) error { return setCount(&o.MaxVirtualServersPerService, v) }},
	{"maxVirtualServersPerNode", "max-virtual-servers-per-node", func(o *Options, v any) error { return setCount(&o.MaxVirtualServersPerNode, v) }},
	{"ipvsInterface", "ipvs-interface", func(o *Options, v any) error { return setString(&o.IPVSInterface, v) }},
	{"ipvsGracefulPeriod", "ipvs-graceful-period", func(o *Options, v any) error {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("want a duration such as \"15m\", got %s", jsonKind(v))
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as \"15m\": %w", err)
		}
		o.IPVSGracefulPeriod = d
		return nil
	}},
}

func setString(dst *string, v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("want a string, got %s", jsonKind(v))
	}
	*dst = s
	return nil
}

func setStrings(dst *[]string, v any) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("want a list of strings, got %s", jsonKind(v))
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return fmt.Errorf("[%d]: want a string, got %s", i, jsonKind(e))
		}
		out = append(out, s)
	}
	*dst = out
	return nil
}

func setCount(dst *int, v any) error {
	n, ok := v.(json.Number)
	if !ok {
		return fmt.Errorf("want an integer, got %s", jsonKind(v))
	}
	i, err := n.Int64()
	if err != nil || i > 1<<31-1 || i < -1<<31 {
		return fmt.Errorf("want an integer, got %s", n)
	}
	*dst = int(i)
	return nil
}

// ownDocument is the decoded second document: its fields, by JSON name,
// not yet applied to Options.
type ownDocument struct {
	name   string // the file, for messages
	values map[string]any
}

// decodeOwn checks an OwnConfiguration document's fields. Unknown fields
// are warnings, as in the KubeProxyConfiguration document; a value of the
// wrong type is an error naming the file and field. null means unset.
func decodeOwn(name string, obj map[string]any) (*ownDocument, []string, error) {
	doc := &ownDocument{name: name, values: map[string]any{}}
	var warnings []string
	var errs []string
	probe := &Options{}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		i := slices.IndexFunc(ownFields, func(f ownField) bool { return f.name == k })
		if i < 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %s: unknown field; ignored", name, k))
			continue
		}
		if obj[k] == nil {
			continue
		}
		if err := ownFields[i].set(probe, obj[k]); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %s: %v", name, k, err))
			continue
		}
		doc.values[k] = obj[k]
	}
	if len(errs) > 0 {
		return nil, warnings, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return doc, warnings, nil
}

// applyOwn sets the document's fields on o, except those whose flag was
// given on the command line, and remembers which came from the file so
// that Validate names the field, not the flag.
func (o *Options) applyOwn(doc *ownDocument, fs *pflag.FlagSet) error {
	if doc == nil {
		return nil
	}
	for _, f := range ownFields {
		v, ok := doc.values[f.name]
		if !ok || fs.Changed(f.flag) {
			continue
		}
		if err := f.set(o, v); err != nil {
			return fmt.Errorf("%s: %s: %w", doc.name, f.name, err)
		}
		if o.ownFromFile == nil {
			o.ownFromFile = map[string]string{}
		}
		o.ownFromFile[f.flag] = doc.name + ": " + f.name
	}
	return nil
}

// origin names where the value of one of our own flags came from: the
// flag, or the --config file and field.
func (o *Options) origin(flag string) string {
	if s, ok := o.ownFromFile[flag]; ok {
		return s
	}
	return "--" + flag
}

// ownConfig is the effective value of every own setting as a document,
// for --write-config-to.
func (o *Options) ownConfig() OwnConfiguration {
	return OwnConfiguration{
		TypeMeta:                     metav1.TypeMeta{APIVersion: OwnConfigAPIVersion, Kind: OwnConfigKind},
		ServiceProxyName:             o.ServiceProxyName,
		NoTrackServices:              append([]string{}, o.NoTrackServices...),
		RefuseNodeAddressExternalIPs: o.RefuseNodeAddressExternalIPs,
		MaxVirtualServersPerService:  o.MaxVirtualServersPerService,
		MaxVirtualServersPerNode:     o.MaxVirtualServersPerNode,
		IPVSInterface:                o.IPVSInterface,
		IPVSGracefulPeriod:           &metav1.Duration{Duration: o.IPVSGracefulPeriod},
	}
}

// MarshalOwnConfig writes c as a KubeIPVSProxyConfiguration YAML document.
func MarshalOwnConfig(c OwnConfiguration) ([]byte, error) {
	data, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", OwnConfigKind, err)
	}
	return data, nil
}
