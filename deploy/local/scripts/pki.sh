#!/usr/bin/env bash
# Creates the local cluster's PKI under .local/pki and its kubeconfigs (admin: .local/kubeconfig,
# components: .local/etc/*.kubeconfig), unless they exist, and the admission webhook server's
# certificate (webhook.crt) and Karpenter's identity (karpenter.crt, .local/etc/karpenter.kubeconfig)
# when they are missing. Called by up.sh and scripts/karpenter.sh.
source "$(dirname "$0")/lib.sh"

# cert NAME CN [O] [SAN]: a key and a certificate signed by the CA; serving too when SAN is set.
cert() {
  local name=$1 cn=$2 org=${3:-} san=${4:-} subj
  subj="/CN=$cn"
  [ -n "$org" ] && subj="/O=$org/CN=$cn"
  openssl genrsa -out "$name.key" 2048 2>/dev/null
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$san"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

# kubeconfig FILE USER CERT
kubeconfig() {
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: readyspan-local
  cluster:
    certificate-authority: $PKI/ca.crt
    server: https://127.0.0.1:$APISERVER_PORT
users:
- name: $2
  user:
    client-certificate: $PKI/$3.crt
    client-key: $PKI/$3.key
contexts:
- name: readyspan-local
  context: {cluster: readyspan-local, user: $2}
current-context: readyspan-local
KC
}

# Karpenter's identity (scripts/karpenter.sh): the user name its chart's ServiceAccount
# (kube-system/karpenter) has, so the chart's RBAC, rendered unchanged, grants it the chart's rights.
karpenter_identity() {
  [ -f karpenter.crt ] || cert karpenter system:serviceaccount:kube-system:karpenter system:serviceaccounts
  [ -f "$ETC/karpenter.kubeconfig" ] ||
    kubeconfig "$ETC/karpenter.kubeconfig" system:serviceaccount:kube-system:karpenter karpenter
}

# The admission webhook server's serving certificate and Karpenter's identity: added to a PKI
# made before they existed.
if [ -f "$PKI/ca.crt" ] && [ -f "$KUBECONFIG_FILE" ]; then
  cd "$PKI"
  [ -f webhook.crt ] || cert webhook readyspan-local-webhook "" "DNS:localhost,IP:127.0.0.1"
  karpenter_identity
  exit 0
fi
rm -rf "$PKI" && mkdir -p "$PKI" && cd "$PKI"

openssl genrsa -out ca.key 2048 2>/dev/null
openssl req -x509 -new -nodes -key ca.key -subj "/CN=readyspan-local-ca" -days 3650 -out ca.crt 2>/dev/null

cert webhook readyspan-local-webhook "" "DNS:localhost,IP:127.0.0.1"
cert apiserver kube-apiserver "" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1,IP:$NODE_IP"
cert admin admin system:masters
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert kube-controller-manager system:kube-controller-manager
cert kube-scheduler system:kube-scheduler
cert kube-proxy system:kube-proxy
cert kubelet-client "system:node:$NODE_NAME" system:nodes
cert kubelet-serving "$NODE_NAME" "" "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP"
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null

for c in kube-controller-manager kube-scheduler kube-proxy; do
  kubeconfig "$ETC/$c.kubeconfig" "system:$c" "$c"
done
kubeconfig "$ETC/kubelet.kubeconfig" "system:node:$NODE_NAME" kubelet-client
kubeconfig "$KUBECONFIG_FILE" admin admin
karpenter_identity
