{
  description = "ksb: coding agents in QEMU sandboxes behind an auditing egress gateway";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.05";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in {
      packages = forAll (pkgs: {
        default = pkgs.stdenv.mkDerivation {
          pname = "ksb";
          version = "0.1.0";
          src = self;
          nativeBuildInputs = [ pkgs.autoreconfHook pkgs.pkg-config ];
          buildInputs = [
            pkgs.libevent pkgs.openssl pkgs.libnftnl pkgs.libmnl
            pkgs.libgit2 pkgs.sqlite pkgs.libseccomp pkgs.json_c
            pkgs.glibc.static   # the guest init is linked statically
          ];
          configureFlags = [ "--sysconfdir=/etc" "--localstatedir=/var" ];
          # The test suite needs root, network namespaces and QEMU.
          doCheck = false;
          meta = {
            description = "Run coding agents in QEMU VMs whose only way out is an auditing CONNECT proxy";
            platforms = pkgs.lib.platforms.linux;
          };
        };
      });
    };
}
