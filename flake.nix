{
  description = "ksb: coding agents in QEMU sandboxes behind an auditing egress gateway";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.05";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      buildInputs = pkgs: [
        pkgs.libevent pkgs.openssl pkgs.libnftnl pkgs.libmnl
        pkgs.libgit2 pkgs.fuse3 pkgs.sqlite pkgs.libseccomp pkgs.json_c pkgs.curl
        pkgs.nghttp2
        pkgs.glibc.static   # the guest init is linked statically
      ];
    in {
      packages = forAll (pkgs: {
        default = pkgs.stdenv.mkDerivation {
          pname = "ksb";
          version = "0.1.0";
          src = self;
          nativeBuildInputs = [ pkgs.autoreconfHook pkgs.pkg-config ];
          buildInputs = buildInputs pkgs;
          configureFlags = [ "--sysconfdir=/etc" "--localstatedir=/var" ];
          # `make check-unit' runs the unit tests (the others need root,
          # namespaces and QEMU); not yet run under the Nix sandbox (this
          # CI cannot fetch nixpkgs), so off until someone has.
          doCheck = false;
          checkTarget = "check-unit";
          nativeCheckInputs = [ pkgs.python3 pkgs.git pkgs.tmux ];
          # make install writes a starting /etc/ksb: into $out/etc here.
          installFlags = [ "sysconfdir=$(out)/etc" ];
          meta = {
            description = "Run coding agents in QEMU VMs whose only way out is an auditing CONNECT proxy";
            platforms = pkgs.lib.platforms.linux;
            mainProgram = "ksb-run";
          };
        };
      });

      # The gateway as a service, the policy as Nix attributes, the guest
      # kernel from nixpkgs: nix/module.nix.
      nixosModules.default = import ./nix/module.nix self;

      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          inputsFrom = [ self.packages.${pkgs.stdenv.hostPlatform.system}.default ];
          packages = [
            pkgs.qemu pkgs.nftables pkgs.iproute2 pkgs.sqlite pkgs.python3
            pkgs.clang pkgs.clang-tools pkgs.git pkgs.tmux pkgs.curl
            pkgs.e2fsprogs pkgs.busybox pkgs.cpio
          ];
        };
      });

      apps = forAll (pkgs:
        let ksb = self.packages.${pkgs.stdenv.hostPlatform.system}.default; in {
          default = { type = "app"; program = "${ksb}/bin/ksb-run"; };
          ksb-run = { type = "app"; program = "${ksb}/bin/ksb-run"; };
          ksbctl = { type = "app"; program = "${ksb}/bin/ksbctl"; };
        });
    };
}
