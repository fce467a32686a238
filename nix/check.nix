# nix/check.nix: evaluate nix/module.nix without nixpkgs (this CI cannot
# fetch it): a stub of the lib functions and types it uses, a fake kernel
# and package, and the config a NixOS system would pass.  Checks what the
# module renders: ksb.conf, the policy text, the unit, users, tmpfiles.
# `nix-instantiate --eval --strict nix/check.nix' prints true or throws.
# Not checked here: the real module system (option merging, types), the
# derivation build, systemd's view of the unit.
let
  lib = {
    mkOption = o: o;
    mkEnableOption = d: { default = false; description = d; };
    mkIf = c: v: if c then v else { };
    types = {
      package = "package"; str = "str"; int = "int"; raw = "raw";
      anything = "anything";
      attrsOf = t: { attrsOf = t; }; listOf = t: { listOf = t; };
      oneOf = ts: { oneOf = ts; };
    };
    concatStringsSep = builtins.concatStringsSep;
    mapAttrsToList = f: s: map (n: f n s.${n}) (builtins.attrNames s);
  };
  kernel = { outPath = "/nix/store/k-linux-6.6"; modDirVersion = "6.6.30"; };
  package = { outPath = "/nix/store/p-ksb-0.1.0"; };
  pkgs = {
    linuxPackages = { inherit kernel; };
    coreutils = { outPath = "/nix/store/c-coreutils"; };
    stdenv.hostPlatform.system = "x86_64-linux";
  };
  self = { packages.x86_64-linux.default = package; };
  services.ksb = {
    enable = true;
    inherit package;
    group = "ksb";
    kernelPackages = pkgs.linuxPackages;
    settings = { proxy-port = 3129; hosts-file = "/etc/ksb/hosts"; };
    policy.profiles = {
      default = { allow = [ "github.com" "*.githubusercontent.com" ]; };
      claude = {
        extends = [ "default" ];
        allow = [ "api.anthropic.com" ];
        allowAddress = [ "10.20.0.0/16:443" ];
        limits = { connections = 32; rate = 20; };
      };
    };
  };
  m = import ./module.nix self { config = { inherit services; }; inherit lib pkgs; };
  c = m.config;
  conf = c.environment.etc."ksb/ksb.conf".text;
  pol = c.environment.etc."ksb/policy.d/nixos.policy".text;
  unit = c.systemd.services.ksb-gatewayd;
  has = s: t: builtins.match "(.*\n)?${t}\n(.*)?" s != null;
  expect = what: ok: if ok then true else throw "nix/check.nix: ${what}";
  checks = [
    (expect "options declared" (m.options.services.ksb ? policy))
    (expect "the option default policy" (m.options.services.ksb.policy.profiles.default ? default))
    (expect "ksb.conf: kernel from kernelPackages"
      (has conf "kernel = /nix/store/k-linux-6.6/bzImage"))
    (expect "ksb.conf: modules-dir"
      (has conf "modules-dir = /nix/store/k-linux-6.6/lib/modules/6.6.30"))
    (expect "ksb.conf: settings" (has conf "proxy-port = 3129"))
    (expect "ksb.conf: control-group" (has conf "control-group = ksb"))
    (expect "ksb.conf: policy glob" (has conf "policy = /etc/ksb/policy.d/[*].policy"))
    (expect "ksb.conf: grants-dir" (has conf "grants-dir = /var/lib/ksb/grants.d"))
    (expect "tmpfiles: grants-dir 0750"
      (builtins.elem "d /var/lib/ksb/grants.d 0750 root ksb -" c.systemd.tmpfiles.rules))
    (expect "policy: extends" (has pol "profile claude extends default [{]"))
    (expect "policy: allow" (has pol "    allow api.anthropic.com"))
    (expect "policy: allow-address" (has pol "    allow-address 10.20.0.0/16:443"))
    (expect "policy: limits" (has pol "    limit connections 32" && has pol "    limit rate 20"))
    (expect "policy: wildcard" (has pol "    allow [*].githubusercontent.com"))
    (expect "unit: checks, then runs the gateway"
      (unit.serviceConfig.ExecStartPre == "/nix/store/p-ksb-0.1.0/sbin/ksb-gatewayd -n"
       && unit.serviceConfig.ExecStart == "/nix/store/p-ksb-0.1.0/sbin/ksb-gatewayd -d"))
    (expect "unit: reloads on a policy change" (builtins.elem pol unit.reloadTriggers))
    (expect "users: _ksbproxy system user" c.users.users._ksbproxy.isSystemUser)
    (expect "groups: ksb" (c.users.groups ? ksb))
    (expect "tmpfiles: /var/lib/ksb 0750"
      (builtins.elem "d /var/lib/ksb 0750 root ksb -" c.systemd.tmpfiles.rules))
    (expect "disabled: nothing"
      ((import ./module.nix self {
        config.services = services // { ksb = services.ksb // { enable = false; }; };
        inherit lib pkgs; }).config == { }))
  ];
in
builtins.all (x: x) checks
