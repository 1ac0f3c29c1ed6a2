# Checks vagrant/Vagrantfile without Vagrant or any box: evaluates it against a recording
# stand-in for Vagrant's configuration API and checks the machines, providers, synced
# folder and provisioning it declares.  Run: ruby vagrant/test_vagrantfile.rb
require "minitest/autorun"

# Records every call made on it (and on what those calls return or yield).
class Recorder
  attr_reader :calls, :children

  def initialize(path = "config")
    @path = path
    @calls = []
    @children = {}
  end

  def method_missing(name, *args, **kw, &blk)
    @calls << [name, args, kw]
    child = (@children[[name, args.first]] ||= Recorder.new("#{@path}.#{name}(#{args.first.inspect})"))
    blk&.call(child)
    child
  end

  def respond_to_missing?(*) = true

  def find(name, first = nil)
    @calls.select { |n, a, _| n == name && (first.nil? || a.first == first) }
  end

  # Attribute writes (e.g. `lv.cpus = 2`) as a hash.
  def assigned
    @calls.select { |n, _, _| n.to_s.end_with?("=") }.to_h { |n, a, _| [n.to_s.chomp("=").to_sym, a.first] }
  end
end

module Vagrant
  class << self
    attr_reader :config, :version

    def configure(version)
      @version = version
      @config = Recorder.new
      yield @config
    end
  end
end

class VagrantfileTest < Minitest::Test
  PATH = File.expand_path("Vagrantfile", __dir__)

  def setup
    %w[PBP_VM_CPUS PBP_VM_MEMORY].each { |v| ENV.delete(v) }
    load PATH, true  # wrapped: its constants do not leak between tests
    @config = Vagrant.config
  end

  def vm = @config.children[[:vm, nil]]

  def test_syntax
    out = `ruby -c #{PATH} 2>&1`
    assert $?.success?, out
  end

  def test_version_2
    assert_equal "2", Vagrant.version
  end

  def test_one_machine_per_target
    names = vm.find(:define).map { |_, a, _| a.first }
    assert_equal %w[ubuntu2204 ubuntu2404 debian12 fedora], names
  end

  def test_boxes
    boxes = vm.find(:define).to_h do |_, a, _|
      [a.first, vm.children[[:define, a.first]].children[[:vm, nil]].assigned[:box]]
    end
    assert_match(/ubuntu-22\.04/, boxes["ubuntu2204"])
    assert_match(/ubuntu-24\.04/, boxes["ubuntu2404"])
    assert_match(/bookworm/, boxes["debian12"])
    assert_match(/fedora/, boxes["fedora"])
  end

  def test_box_override_from_environment
    ENV["PBP_BOX_FEDORA"] = "fedora/42-cloud-base"
    load PATH, true  # wrapped: its constants do not leak between tests
    node = Vagrant.config.children[[:vm, nil]].children[[:define, "fedora"]].children[[:vm, nil]]
    assert_equal "fedora/42-cloud-base", node.assigned[:box]
  ensure
    ENV.delete("PBP_BOX_FEDORA")
  end

  def test_libvirt_and_virtualbox
    providers = vm.find(:provider).map { |_, a, _| a.first }
    assert_equal %w[libvirt virtualbox], providers
    %w[libvirt virtualbox].each do |p|
      settings = vm.children[[:provider, p]].assigned
      assert_equal 2, settings[:cpus], p
      assert_operator settings[:memory], :>=, 2048, p
    end
  end

  def test_repository_synced_to_vagrant
    folders = vm.find(:synced_folder)
    repo = File.expand_path("..", __dir__)
    synced = folders.find { |_, a, _| a == [repo, "/vagrant"] }
    refute_nil synced, folders.inspect
    assert_equal "rsync", synced[2][:type]
    assert_includes synced[2][:rsync__exclude], "build/"
  end

  def test_every_machine_runs_provision_sh
    vm.find(:define).each do |_, a, _|
      node_vm = vm.children[[:define, a.first]].children[[:vm, nil]]
      prov = node_vm.find(:provision)
      assert_equal 1, prov.size, a.first
      _, args, kw = prov.first
      assert_equal "shell", args.first
      assert_equal File.expand_path("provision.sh", __dir__), kw[:path]
      assert File.executable?(kw[:path])
      assert_equal [a.first], kw[:args]
    end
  end

  def test_shell_scripts_parse
    %w[provision.sh run-tests].each do |f|
      path = File.expand_path(f, __dir__)
      out = `bash -n #{path} 2>&1`
      assert $?.success?, "#{f}: #{out}"
    end
  end
end
