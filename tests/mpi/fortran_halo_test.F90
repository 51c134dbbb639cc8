! A halo exchange from Fortran through gdte: Open MPI's Fortran bindings call PMPI_* directly,
! so only libgdte_mpi.so's Fortran entry points (src/mpi/fortran.c) bring these calls to gdte.
! Built twice: with `use mpi` (mpi_send_ and friends) and, with GDTE_F08 defined, with
! `use mpi_f08` (Open MPI's ompi_*_f).
!
! Each rank holds u(0:nx+1, 0:ny+1), its ranks a periodic ring along the second dimension. The
! exchange runs once on "device" arrays (host memory registered as fake device memory by the C
! helper ft_dev_alloc, fortran_helper.c) and once on ordinary arrays, and every element must be
! the same: nonblocking columns (contiguous) and rows (a vector type: strided) completed by
! MPI_Waitall with statuses, MPI_Sendrecv with MPI_STATUS_IGNORE, persistent requests with
! MPI_Startall and MPI_STATUSES_IGNORE, MPI_Sendrecv_replace, MPI_Test, MPI_Waitany,
! MPI_Pack/MPI_Unpack, reductions (MPI_Allreduce with MPI_IN_PLACE, MPI_Reduce,
! MPI_Iallreduce, MPI_Reduce_local), collectives (MPI_Alltoallw with subarray types on both
! sides, and where Open MPI's mpi_ext module has its persistent collectives a persistent
! MPI_Neighbor_alltoallw (MPIX_Neighbor_alltoallw_init) on a Cartesian ring started twice with new
! data), and an MPI_Put whose origin is device memory, each also checked against the values the
! program computes. In fake mode the device pass
! must go through gdte (its counters move) and the host pass must not.
program fortran_halo_test
#ifdef GDTE_F08
  use mpi_f08
#ifdef GDTE_MPIX_F
  use mpi_f08_ext
#endif
#else
  use mpi
#ifdef GDTE_MPIX_F
  use mpi_ext
#endif
#endif
  use iso_c_binding
  implicit none
  interface
#include "fortran_helper.inc"
  end interface

  integer, parameter :: nx = 13, ny = 7
  integer :: rank, np, ierr, fails, checks, total(2), mine(2)
  integer(c_int64_t) :: t0, t1
  type(c_ptr) :: pu, pv, ps, pz, py
  real(8), pointer :: ud(:,:), vd(:,:), sd(:), zd(:,:), yd(:,:)
  real(8), allocatable :: uh(:,:), vh(:,:), sh(:), zh(:,:), yh(:,:)
#ifdef GDTE_F08
  type(MPI_Comm) :: comm
#else
  integer :: comm
#endif

  call MPI_Init(ierr)
  comm = MPI_COMM_WORLD
  call MPI_Comm_rank(comm, rank, ierr)
  call MPI_Comm_size(comm, np, ierr)
  fails = 0
  checks = 0

  pu = ft_dev_alloc(int(8 * (nx + 2) * (ny + 2), c_int64_t))
  pv = ft_dev_alloc(int(8 * (nx + 2) * (ny + 2), c_int64_t))
  ps = ft_dev_alloc(int(8 * 8, c_int64_t))
  pz = ft_dev_alloc(int(8 * (2 * np + 2) * (ny + 2), c_int64_t))
  py = ft_dev_alloc(int(8 * (nx + 2) * (ny + 2), c_int64_t))
  call c_f_pointer(pu, ud, [nx + 2, ny + 2])
  call c_f_pointer(pv, vd, [nx + 2, ny + 2])
  call c_f_pointer(ps, sd, [8])
  call c_f_pointer(pz, zd, [2 * np + 2, ny + 2])
  call c_f_pointer(py, yd, [nx + 2, ny + 2])
  allocate(uh(nx + 2, ny + 2), vh(nx + 2, ny + 2), sh(8), zh(2 * np + 2, ny + 2), yh(nx + 2, ny + 2))

  t0 = ft_gdte_traffic()
  call exchange(ud, vd, sd, zd, yd, .true.)
  t1 = ft_gdte_traffic()
  if (ft_expect_gdte() == 1) call check(t1 > t0, 'the device pass did not go through gdte')
  t0 = ft_gdte_traffic()
  call exchange(uh, vh, sh, zh, yh, .false.)
  t1 = ft_gdte_traffic()
  call check(t1 == t0, 'the host pass went through gdte')

  call check(all(ud == uh), 'u differs between device and host arrays')
  call check(all(vd == vh), 'v differs between device and host arrays')
  call check(all(sd == sh), 'reductions differ between device and host arrays')
  call check(all(zd == zh), 'MPI_Alltoallw differs between device and host arrays')
  call check(all(yd == yh), 'the persistent MPI_Neighbor_alltoallw differs between device and host arrays')

  call probe_count(ud, vd)
  call ft_dev_free(pu)
  call ft_dev_free(pv)
  call ft_dev_free(ps)
  call ft_dev_free(pz)
  call ft_dev_free(py)
  deallocate(uh, vh, sh, zh, yh)
  mine = [checks, fails]
  call MPI_Allreduce(mine, total, 2, MPI_INTEGER, MPI_SUM, comm, ierr)
  if (rank == 0) then
#ifdef GDTE_F08
    write (*, '(a, i0, a, i0, a, i0, a)') 'fortran_halo_test (mpi_f08, np ', np, '): ', total(1), ' checks, ', &
      total(2), ' failed'
#else
    write (*, '(a, i0, a, i0, a, i0, a)') 'fortran_halo_test (use mpi, np ', np, '): ', total(1), ' checks, ', &
      total(2), ' failed'
#endif
  end if
  call MPI_Finalize(ierr)
  if (total(2) > 0) stop 1

contains

  ! MPI_Probe, then MPI_Get_count: the size of a device message, whichever path carried it (the
  ! node path sends a 248-byte marker, which the probe must not report).
  subroutine probe_count(a, b)
    real(8), intent(inout) :: a(:,:), b(:,:)
    integer :: n, cnt
    logical :: flag
#ifdef GDTE_F08
    type(MPI_Status) :: st
#else
    integer :: st(MPI_STATUS_SIZE)
#endif
    if (np < 2 .or. rank > 1) return
    n = size(a)
    if (rank == 0) then
      call MPI_Send(a, n, MPI_DOUBLE_PRECISION, 1, 77, comm, ierr)
      call ok_ierr(ierr, 'MPI_Send before the probe')
    else
      flag = .false.
      do while (.not. flag)
        call MPI_Iprobe(0, 77, comm, flag, st, ierr)
      end do
      call MPI_Get_count(st, MPI_DOUBLE_PRECISION, cnt, ierr)
      call check(cnt == n, 'MPI_Iprobe of a device message reports another size')
      call MPI_Probe(0, 77, comm, st, ierr)
      call MPI_Get_count(st, MPI_DOUBLE_PRECISION, cnt, ierr)
      call check(cnt == n, 'MPI_Probe of a device message reports another size')
      call MPI_Recv(b, cnt, MPI_DOUBLE_PRECISION, 0, 77, comm, st, ierr)
      call ok_ierr(ierr, 'MPI_Recv after the probe')
    end if
  end subroutine

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    checks = checks + 1
    if (.not. ok) then
      fails = fails + 1
      write (*, '(a, i0, 2a)') '[rank ', rank, '] FAIL: ', what
    end if
  end subroutine

  subroutine ok_ierr(e, what)
    integer, intent(in) :: e
    character(*), intent(in) :: what
    call check(e == MPI_SUCCESS, what)
  end subroutine

  subroutine exchange(u, v, s, z, y, dev)
    real(8), intent(inout) :: u(0:nx + 1, 0:ny + 1), v(0:nx + 1, 0:ny + 1), s(8)
    real(8), intent(inout) :: z(0:2 * np + 1, 0:ny + 1), y(0:nx + 1, 0:ny + 1)
    logical, intent(in) :: dev
    integer :: up, down, i, j, round, idx, pos, k, peer, left, right
    integer :: sizes(2), subs(2), starts(2), cnt1(np), dsp1(np), ncnt(2)
    integer(kind=MPI_ADDRESS_KIND) :: ndsp(2), wsize, tdisp
    real(8) :: want
    integer(c_int64_t) :: c0, cwant
    ! The window: MPI writes it between the fences, behind the compiler's back.
    real(8), asynchronous :: wb(4)
    logical :: ok
    logical :: flag
    character(len=1) :: packed(8 * (ny + nx + 4))
#ifdef GDTE_F08
    type(MPI_Datatype) :: rowt, stypes(np), rtypes(np), nst(2), nrt(2)
    type(MPI_Request) :: reqs(4), preqs(4), r1
    type(MPI_Status) :: sts(4), st
    type(MPI_Comm) :: ring
    type(MPI_Win) :: win
#else
    integer :: rowt, reqs(4), preqs(4), r1, sts(MPI_STATUS_SIZE, 4), st(MPI_STATUS_SIZE)
    integer :: stypes(np), rtypes(np), nst(2), nrt(2), ring, win
#endif
    integer :: cnt

    up = mod(rank + 1, np)
    down = mod(rank + np - 1, np)
    do j = 0, ny + 1
      do i = 0, nx + 1
        u(i, j) = -1d0
        v(i, j) = -2d0
      end do
    end do
    do j = 1, ny
      do i = 1, nx
        u(i, j) = rank * 1000d0 + i + 0.5d0 * j
      end do
    end do
    s = -3d0

    ! Rows of the interior: ny doubles at a stride of a column.
    call MPI_Type_vector(ny, 1, nx + 2, MPI_DOUBLE_PRECISION, rowt, ierr)
    call MPI_Type_commit(rowt, ierr)

    ! 1. Nonblocking: columns to the ring neighbours, rows 1 and nx of u into rows 0 and nx+1.
    call MPI_Irecv(u(1, 0), nx, MPI_DOUBLE_PRECISION, down, 1, comm, reqs(1), ierr)
    call MPI_Irecv(u(1, ny + 1), nx, MPI_DOUBLE_PRECISION, up, 2, comm, reqs(2), ierr)
    call MPI_Isend(u(1, ny), nx, MPI_DOUBLE_PRECISION, up, 1, comm, reqs(3), ierr)
    call MPI_Isend(u(1, 1), nx, MPI_DOUBLE_PRECISION, down, 2, comm, reqs(4), ierr)
    call MPI_Waitall(4, reqs, sts, ierr)
    call ok_ierr(ierr, 'MPI_Waitall (columns)')
#ifdef GDTE_F08
    call check(sts(1)%MPI_SOURCE == down .and. sts(2)%MPI_TAG == 2, 'MPI_Waitall statuses')
    call MPI_Get_count(sts(1), MPI_DOUBLE_PRECISION, cnt, ierr)
#else
    call check(sts(MPI_SOURCE, 1) == down .and. sts(MPI_TAG, 2) == 2, 'MPI_Waitall statuses')
    call MPI_Get_count(sts(:, 1), MPI_DOUBLE_PRECISION, cnt, ierr)
#endif
    call check(cnt == nx, 'MPI_Get_count of a column')
    call MPI_Irecv(u(0, 1), 1, rowt, down, 3, comm, reqs(1), ierr)
    call MPI_Isend(u(nx, 1), 1, rowt, up, 3, comm, reqs(2), ierr)
    call MPI_Waitany(2, reqs, idx, st, ierr)
    call check(idx == 1 .or. idx == 2, 'MPI_Waitany index')
    call MPI_Waitany(2, reqs, idx, MPI_STATUS_IGNORE, ierr)
    call ok_ierr(ierr, 'MPI_Waitany (rows)')

    ! 2. Sendrecv: the other row direction, statuses ignored.
    call MPI_Sendrecv(u(1, 1), 1, rowt, down, 4, u(nx + 1, 1), 1, rowt, up, 4, comm, MPI_STATUS_IGNORE, ierr)
    call ok_ierr(ierr, 'MPI_Sendrecv')

    ! 3. Persistent: v's columns from u's, two rounds.
    call MPI_Recv_init(v(1, 0), nx, MPI_DOUBLE_PRECISION, down, 5, comm, preqs(1), ierr)
    call MPI_Recv_init(v(1, ny + 1), nx, MPI_DOUBLE_PRECISION, up, 6, comm, preqs(2), ierr)
    call MPI_Send_init(u(1, ny), nx, MPI_DOUBLE_PRECISION, up, 5, comm, preqs(3), ierr)
    call MPI_Send_init(u(1, 1), nx, MPI_DOUBLE_PRECISION, down, 6, comm, preqs(4), ierr)
    do round = 1, 2
      call MPI_Startall(4, preqs, ierr)
      call MPI_Waitall(4, preqs, MPI_STATUSES_IGNORE, ierr)
      call ok_ierr(ierr, 'MPI_Waitall (persistent)')
    end do
    do i = 1, 4
      call MPI_Request_free(preqs(i), ierr)
    end do

    ! 4. Sendrecv_replace of v's first interior column, then MPI_Test on a receive.
    v(1:nx, 1) = u(1:nx, 1) + 0.25d0
    call MPI_Sendrecv_replace(v(1, 1), nx, MPI_DOUBLE_PRECISION, up, 7, down, 7, comm, st, ierr)
    call ok_ierr(ierr, 'MPI_Sendrecv_replace')
    call MPI_Irecv(v(1, 2), nx, MPI_DOUBLE_PRECISION, down, 8, comm, r1, ierr)
    call MPI_Send(u(1, 3), nx, MPI_DOUBLE_PRECISION, up, 8, comm, ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_Test(r1, flag, st, ierr)
    end do

    ! 5. Pack a row and a column into host bytes, unpack them into v's third column and row.
    pos = 0
    call MPI_Pack(u(2, 1), 1, rowt, packed, size(packed), pos, comm, ierr)
    call MPI_Pack(u(1, 4), nx, MPI_DOUBLE_PRECISION, packed, size(packed), pos, comm, ierr)
    call check(pos == 8 * (ny + nx), 'MPI_Pack position')
    pos = 0
    call MPI_Unpack(packed, size(packed), pos, v(3, 1), 1, rowt, comm, ierr)
    call MPI_Unpack(packed, size(packed), pos, v(1, 5), nx, MPI_DOUBLE_PRECISION, comm, ierr)
    call ok_ierr(ierr, 'MPI_Unpack')

    ! 6. Reductions on the array itself.
    s(1) = sum(u(1:nx, 1:ny))
    s(2) = maxval(u(1:nx, 1:ny))
    call MPI_Allreduce(MPI_IN_PLACE, s(1), 1, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
    call ok_ierr(ierr, 'MPI_Allreduce in place')
    call MPI_Reduce(s(2), s(3), 1, MPI_DOUBLE_PRECISION, MPI_MAX, 0, comm, ierr)
    if (rank /= 0) s(3) = 0d0
    call MPI_Iallreduce(u(1, 1), s(4), 2, MPI_DOUBLE_PRECISION, MPI_MIN, comm, r1, ierr)
    call MPI_Wait(r1, MPI_STATUS_IGNORE, ierr)
    call ok_ierr(ierr, 'MPI_Iallreduce')
    s(6:7) = u(1:2, 2)
    call MPI_Reduce_local(u(1, 3), s(6), 2, MPI_DOUBLE_PRECISION, MPI_SUM, ierr)
    call ok_ierr(ierr, 'MPI_Reduce_local')

    ! 7. MPI_Alltoallw: to each peer two rows of u's interior (a subarray), received into z's
    ! rows 2*peer+1 and 2*peer+2 (a subarray of z), the rest of z left alone.
    do peer = 0, np - 1
      sizes = [nx + 2, ny + 2]
      subs = [2, ny]
      starts = [1 + mod(2 * peer, nx - 1), 1]
      call MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_DOUBLE_PRECISION, &
                                    stypes(peer + 1), ierr)
      call MPI_Type_commit(stypes(peer + 1), ierr)
      sizes = [2 * np + 2, ny + 2]
      starts = [1 + 2 * peer, 1]
      call MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_DOUBLE_PRECISION, &
                                    rtypes(peer + 1), ierr)
      call MPI_Type_commit(rtypes(peer + 1), ierr)
    end do
    cnt1 = 1
    dsp1 = 0
    z = -5d0
    ! gdte carries the call on device arrays (its Fortran entry point, not Open MPI's): one call.
    cwant = 0
    if (dev .and. ft_expect_gdte() == 1) cwant = 1
    c0 = ft_coll_calls()
    call MPI_Alltoallw(u, cnt1, dsp1, stypes, z, cnt1, dsp1, rtypes, comm, ierr)
    call ok_ierr(ierr, 'MPI_Alltoallw')
    call check(ft_coll_calls() - c0 == cwant, 'MPI_Alltoallw: gdte did not carry it on device arrays, or did on host arrays')
    ok = .true.
    do j = 0, ny + 1
      do i = 0, 2 * np + 1
        peer = (i - 1) / 2
        k = mod(i - 1, 2)
        want = -5d0
        if (i >= 1 .and. i <= 2 * np .and. j >= 1 .and. j <= ny) &
          want = peer * 1000d0 + (1 + mod(2 * rank, nx - 1) + k) + 0.5d0 * j
        if (z(i, j) /= want) ok = .false.
      end do
    end do
    call check(ok, 'MPI_Alltoallw: z is not what the peers sent')
    do peer = 1, np
      call MPI_Type_free(stypes(peer), ierr)
      call MPI_Type_free(rtypes(peer), ierr)
    end do

    ! 8. One-sided: MPI_Put from s(8) into the right neighbour's window (host memory); from device
    ! memory gdte gives the MPI a host mirror. The value arrives in every mode.
    wb = -9d0
    s(8) = rank + 0.5d0
    wsize = 8 * size(wb)
    call MPI_Win_create(wb, wsize, 8, MPI_INFO_NULL, comm, win, ierr)
    call ok_ierr(ierr, 'MPI_Win_create')
    call MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN, ierr)
    call MPI_Win_fence(0, win, ierr)
    tdisp = 0
    call MPI_Put(s(8), 1, MPI_DOUBLE_PRECISION, up, tdisp, 1, MPI_DOUBLE_PRECISION, win, ierr)
    call ok_ierr(ierr, 'MPI_Put')
    call MPI_Win_fence(0, win, ierr)
    call MPI_F_sync_reg(wb)
    want = down + 0.5d0
    call check(wb(1) == want .and. all(wb(2:4) == -9d0), 'MPI_Put: the window holds the wrong value')
    call MPI_Win_free(win, ierr)
    s(8) = 0d0

#ifdef GDTE_MPIX_F
    ! 9. A persistent MPI_Neighbor_alltoallw on an open Cartesian ring: u's first and last
    ! interior columns to the left and right neighbours, into y's halo columns 0 and ny+1 (MPI_PROC_NULL
    ! at the ends: left alone), started twice, u's columns changed before each start.
    call MPI_Cart_create(comm, 1, [np], [.false.], .false., ring, ierr)
    call MPI_Cart_shift(ring, 0, 1, left, right, ierr)
    sizes = [nx + 2, ny + 2]
    subs = [nx, 1]
    do k = 1, 2
      starts = [1, merge(1, ny, k == 1)]
      call MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_DOUBLE_PRECISION, nst(k), ierr)
      call MPI_Type_commit(nst(k), ierr)
      starts = [1, merge(0, ny + 1, k == 1)]
      call MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_DOUBLE_PRECISION, nrt(k), ierr)
      call MPI_Type_commit(nrt(k), ierr)
    end do
    ncnt = 1
    ndsp = 0
    y = -7d0
    call MPIX_Neighbor_alltoallw_init(u, ncnt, ndsp, nst, y, ncnt, ndsp, nrt, ring, MPI_INFO_NULL, r1, ierr)
    call ok_ierr(ierr, 'MPIX_Neighbor_alltoallw_init')
    do round = 1, 2
      u(1:nx, 1) = u(1:nx, 1) + 0.125d0
      u(1:nx, ny) = u(1:nx, ny) + 0.125d0
      c0 = ft_coll_calls()
      call MPI_Start(r1, ierr)
      call MPI_Wait(r1, MPI_STATUS_IGNORE, ierr)
      call ok_ierr(ierr, 'persistent MPI_Neighbor_alltoallw')
      call check(ft_coll_calls() - c0 == cwant, 'persistent MPI_Neighbor_alltoallw: not carried by gdte as expected')
      ok = .true.
      do j = 0, ny + 1
        do i = 0, nx + 1
          want = -7d0
          if (i >= 1 .and. i <= nx .and. j == 0 .and. left /= MPI_PROC_NULL) &
            want = left * 1000d0 + i + 0.5d0 * ny + 0.125d0 * round
          if (i >= 1 .and. i <= nx .and. j == ny + 1 .and. right /= MPI_PROC_NULL) &
            want = right * 1000d0 + i + 0.5d0 + 0.125d0 * round
          if (y(i, j) /= want) ok = .false.
        end do
      end do
      call check(ok, 'persistent MPI_Neighbor_alltoallw: y is not what the neighbours sent')
    end do
    call MPI_Request_free(r1, ierr)
    call ok_ierr(ierr, 'MPI_Request_free (persistent collective)')
    do k = 1, 2
      call MPI_Type_free(nst(k), ierr)
      call MPI_Type_free(nrt(k), ierr)
    end do
    call MPI_Comm_free(ring, ierr)
#else
    y = -7d0
#endif

    call MPI_Type_free(rowt, ierr)
  end subroutine

end program
