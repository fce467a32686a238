# nix/flakecheck.nix: evaluate flake.nix's outputs without nixpkgs (this
# CI cannot fetch it): its inputs a stub nixpkgs whose lib has what the
# flake calls (genAttrs, platforms) and whose packages are names
# standing for derivations, mkDerivation and mkShell returning their
# arguments.  Checks what the flake declares: its outputs per system,
# the package's sources, build inputs and flags, the apps' programs,
# the dev shell, the module.  `nix-instantiate --eval --strict
# nix/flakecheck.nix' prints true or throws.  Not checked here: the
# real nixpkgs' attributes, the build itself.
let
  flake = import ../flake.nix;
  systems = [ "x86_64-linux" "aarch64-linux" ];
  pkgsFor = system:
    let
      stub = name: { outPath = "/nix/store/stub-${name}"; inherit name; };
      names = [ "libevent" "openssl" "libnftnl" "libmnl" "libgit2" "fuse3"
        "sqlite" "libseccomp" "json_c" "curl" "nghttp2" "autoreconfHook" "pkg-config"
        "python3" "git" "tmux" "qemu" "nftables" "iproute2" "clang"
        "clang-tools" "e2fsprogs" "busybox" "cpio" ];
    in
    builtins.listToAttrs (map (n: { name = n; value = stub n; }) names) // {
      glibc.static = stub "glibc-static";
      lib.platforms.linux = systems;
      stdenv = {
        hostPlatform.system = system;
        mkDerivation = a: a // { outPath = "/nix/store/out-${a.pname}-${a.version}"; };
      };
      mkShell = a: a // { shell = true; };
    };
  nixpkgs = {
    lib.genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
    legacyPackages = builtins.listToAttrs (map (s: { name = s; value = pkgsFor s; }) systems);
  };
  self = out // { outPath = toString ../.; };
  out = flake.outputs { inherit self nixpkgs; };
  expect = what: ok: if ok then true else throw "nix/flakecheck.nix: ${what}";
  names = map (p: p.name);
  perSystem = s:
    let
      p = out.packages.${s}.default;
      d = out.devShells.${s}.default;
      a = out.apps.${s};
    in [
      (expect "${s}: packages.default is ksb 0.1.0" (p.pname == "ksb" && p.version == "0.1.0"))
      (expect "${s}: the package's source is the flake" (p.src == self))
      (expect "${s}: autoreconf and pkg-config" (names p.nativeBuildInputs == [ "autoreconfHook" "pkg-config" ]))
      (expect "${s}: every library configure.ac asks for"
        (builtins.all (n: builtins.elem n (names p.buildInputs))
          [ "libevent" "openssl" "libnftnl" "libmnl" "libgit2" "fuse3" "sqlite" "libseccomp" "json_c" "curl" "nghttp2" "glibc-static" ]))
      (expect "${s}: configured for /etc and /var"
        (p.configureFlags == [ "--sysconfdir=/etc" "--localstatedir=/var" ]))
      (expect "${s}: mainProgram ksb-run" (p.meta.mainProgram == "ksb-run"))
      (expect "${s}: the dev shell has the package's inputs and the test tools"
        (d.shell && d.inputsFrom == [ p ]
         && builtins.all (n: builtins.elem n (names d.packages)) [ "qemu" "nftables" "iproute2" "sqlite" "e2fsprogs" ]))
      (expect "${s}: apps default, ksb-run, ksbctl"
        (builtins.attrNames a == [ "default" "ksb-run" "ksbctl" ]
         && builtins.all (x: x.type == "app") (builtins.attrValues a)
         && a.default.program == "${p}/bin/ksb-run"
         && a.ksb-run.program == "${p}/bin/ksb-run"
         && a.ksbctl.program == "${p}/bin/ksbctl"))
    ];
  checks = [
    (expect "inputs: nixpkgs from GitHub" (builtins.match "github:NixOS/nixpkgs/.*" flake.inputs.nixpkgs.url != null))
    (expect "outputs: the four kinds"
      (builtins.attrNames out == [ "apps" "devShells" "nixosModules" "packages" ]))
    (expect "systems: x86_64-linux, aarch64-linux"
      (let sorted = builtins.sort builtins.lessThan systems; in builtins.attrNames out.packages == sorted && builtins.attrNames out.apps == sorted
       && builtins.attrNames out.devShells == sorted))
    (expect "nixosModules.default is a module function" (builtins.isFunction out.nixosModules.default))
  ] ++ builtins.concatMap perSystem systems;
in
builtins.all (x: x) checks
