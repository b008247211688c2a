# shellcheck shell=bash
# The lab cluster's certificates, made with openssl (sourced by up.sh).
# One CA signs everything: the apiserver's serving cert, the client certs
# of the admin, controller-manager, scheduler, the apiserver's client cert
# for kubelets, and per node the kubelet's client and serving certs. The
# service-account key pair signs tokens. EC P-256 keys: quick to make.

# cert <dir> <name> <subject> <extensions>: a key and a CA-signed cert.
cert() {
	local dir=$1 name=$2 subj=$3 ext=$4
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/$name.key" 2>/dev/null
	openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr" 2>/dev/null
	printf '%s\n' "$ext" >"$dir/$name.ext"
	openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
		-days 30 -sha256 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
	rm -f "$dir/$name.csr" "$dir/$name.ext"
}

client_ext='basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth'

# make_pki <dir> <node count>
make_pki() {
	local dir=$1 n=$2 i name
	mkdir -p "$dir"
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$dir/ca.key" -subj "/CN=kube-ipvs-proxy-lab-ca" -days 30 \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		-out "$dir/ca.crt" 2>/dev/null
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/sa.key" 2>/dev/null
	openssl ec -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
	cert "$dir" apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$GW4,IP:$GW6,IP:${SVC_CIDR4%.0/*}.1,IP:${SVC_CIDR6%/*}1,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert "$dir" admin "/O=system:masters/CN=kubernetes-admin" "$client_ext"
	cert "$dir" controller-manager "/CN=system:kube-controller-manager" "$client_ext"
	cert "$dir" scheduler "/CN=system:kube-scheduler" "$client_ext"
	cert "$dir" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client_ext"
	for ((i = 1; i <= n; i++)); do
		name=$(node_name "$i")
		cert "$dir" "kubelet-$name" "/O=system:nodes/CN=system:node:$name" "$client_ext"
		cert "$dir" "kubelet-serving-$name" "/O=system:nodes/CN=system:node:$name" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$(node_ip4 "$i"),IP:$(node_ip6 "$i"),DNS:$name"
	done
}

# kubeconfig <file> <server> <cert name> <pki dir>: a kubeconfig with
# embedded certificates.
kubeconfig() {
	local file=$1 server=$2 name=$3 dir=$4
	cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$dir/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$dir/$name.crt")
    client-key-data: $(base64 -w0 <"$dir/$name.key")
contexts:
- name: lab
  context: {cluster: lab, user: $name}
current-context: lab
KC
}
