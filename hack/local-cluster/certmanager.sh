#!/usr/bin/env bash
# Stands in for cert-manager on the local cluster (no registry, so no cert-manager image):
# installs the Issuer and Certificate CRDs and starts certmanager/standin.py on the host,
# which issues self-signed Certificates and injects their CA (see its docstring). Enough for
# memop's overlays that use cert-manager (default, namespaced, leader-for-life, sharded).
#   hack/local-cluster/certmanager.sh         (down.sh stops it)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

KUBECTL=$(k8s_bin kubectl)
command -v openssl >/dev/null || die "missing 'openssl'"
"$KUBECTL" get --raw /readyz >/dev/null 2>&1 || die "the local cluster is not running (hack/local-cluster/up.sh)"
"$KUBECTL" apply -f "$here/certmanager/crds.yaml" >/dev/null
"$KUBECTL" wait --for=condition=Established crd/certificates.cert-manager.io crd/issuers.cert-manager.io >/dev/null
start certmanager-standin env KUBECTL="$KUBECTL" python3 "$here/certmanager/standin.py"
echo "cert-manager stand-in running (log: $D/logs/certmanager-standin.log)"
