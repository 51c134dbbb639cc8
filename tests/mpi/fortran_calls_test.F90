! The Fortran entry points src/mpi/fortran.c defines for the collectives, one-sided calls, MPI-IO
! and other calls gdte carries, through Open MPI's `use mpi` (mpi_x_) and, with GDTE_F08 defined, `use mpi_f08`
! (ompi_x_f) bindings. Without these entry points Open MPI's Fortran libraries would call PMPI_*
! directly: a device array would reach an MPI that cannot read it (a segfault on a GPU).
!
! 1. Collectives, every carried form, blocking and nonblocking, and (where Open MPI's mpi_ext
!    module has them) persistent ones started twice with new data: once on "device" arrays (host
!    memory registered as fake device memory, fortran_helper.c) and once on host arrays, each
!    result checked against the values the program computes; in fake mode gdte's coll_calls
!    counter moves by one per call (per start) on device arrays and not on host arrays.
! 2. The calls once refused, every shape of fortran.c, on host arrays: they reach the MPI and give
!    the data the program computes (one-sided under fences and under passive-target locks, MPI-IO
!    with explicit offsets, individual and shared file pointers and split collectives, external32
!    packing, buffered sends). On device arrays MPI_Get, a window over device memory (MPI_Put
!    into it under fences, MPI_Win_sync), MPI_File_write_at, MPI_Pack_external and
!    MPI_Buffer_attach/MPI_Buffer_detach always go through (gdte carries them).
program fortran_calls_test
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

  integer, parameter :: n = 5, maxp = 16
  integer :: rank, np, ierr, fails, checks, total(2), mine(2), left, right, up, down
  type(c_ptr) :: pa, pb
  real(8), pointer :: ad(:), bd(:)
  real(8), allocatable :: ah(:), bh(:)
  integer(c_int64_t) :: c0
#ifdef GDTE_F08
  type(MPI_Comm) :: comm, line, ring
#else
  integer :: comm, line, ring
#endif

  call MPI_Init(ierr)
  comm = MPI_COMM_WORLD
  call MPI_Comm_rank(comm, rank, ierr)
  call MPI_Comm_size(comm, np, ierr)
  call MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN, ierr)
  fails = 0
  checks = 0
  up = mod(rank + 1, np)
  down = mod(rank + np - 1, np)
  ! An open line (MPI_PROC_NULL at the ends) for the neighborhood alltoall forms, a periodic ring
  ! for the allgather forms (a neighbour met twice sends the same data both times).
  call MPI_Cart_create(comm, 1, [np], [.false.], .false., line, ierr)
  call MPI_Cart_shift(line, 0, 1, left, right, ierr)
  call MPI_Cart_create(comm, 1, [np], [.true.], .false., ring, ierr)

  pa = ft_dev_alloc(int(8 * n * np, c_int64_t))
  pb = ft_dev_alloc(int(8 * n * np, c_int64_t))
  call c_f_pointer(pa, ad, [n * np])
  call c_f_pointer(pb, bd, [n * np])
  allocate(ah(n * np), bh(n * np))
  if (np > maxp) stop 77

  call colls(ad, bd, .true.)
  call colls(ah, bh, .false.)
  call refused_host()
  call refused_device(ad)

  call ft_dev_free(pa)
  call ft_dev_free(pb)
  deallocate(ah, bh)
  call MPI_Comm_free(line, ierr)
  call MPI_Comm_free(ring, ierr)
  mine = [checks, fails]
  call MPI_Allreduce(mine, total, 2, MPI_INTEGER, MPI_SUM, comm, ierr)
  if (rank == 0) then
#ifdef GDTE_F08
    write (*, '(a, i0, a, i0, a, i0, a)') 'fortran_calls_test (mpi_f08, np ', np, '): ', total(1), ' checks, ', &
      total(2), ' failed'
#else
    write (*, '(a, i0, a, i0, a, i0, a)') 'fortran_calls_test (use mpi, np ', np, '): ', total(1), ' checks, ', &
      total(2), ' failed'
#endif
  end if
  call MPI_Finalize(ierr)
  if (total(2) > 0) stop 1

contains

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

  ! Element k of rank r's send array, round `sh`.
  pure real(8) function val(r, k, sh)
    integer, intent(in) :: r, k, sh
    val = r * 100d0 + k + 0.25d0 * sh
  end function

  ! b(first : first + n - 1) holds elements k0 + 1 .. k0 + n of rank r's array (r = MPI_PROC_NULL:
  ! still the poison -1).
  logical function block_is(b, first, r, k0, sh)
    real(8), intent(in) :: b(:)
    integer, intent(in) :: first, r, k0, sh
    integer :: k
    block_is = .true.
    do k = 1, n
      if (r == MPI_PROC_NULL) then
        if (b(first + k - 1) /= -1d0) block_is = .false.
      else
        if (b(first + k - 1) /= val(r, k0 + k, sh)) block_is = .false.
      end if
    end do
  end function

  subroutine fill(a, b, sh)
    real(8), intent(inout) :: a(:), b(:)
    integer, intent(in) :: sh
    integer :: k
    do k = 1, n * np
      a(k) = val(rank, k, sh)
    end do
    b = -1d0
  end subroutine

  ! gdte carried `calls` collective calls since c0 on device arrays in fake mode, none otherwise.
  subroutine carried(dev, calls, what)
    logical, intent(in) :: dev
    integer, intent(in) :: calls
    character(*), intent(in) :: what
    integer(c_int64_t) :: want
    want = 0
    if (dev .and. ft_expect_gdte() == 1) want = calls
    call check(ft_coll_calls() - c0 == want, what // ': gdte carried it where it should not, or did not where it should')
  end subroutine

  subroutine colls(a, b, dev)
    real(8), intent(inout) :: a(:), b(:)
    logical, intent(in) :: dev
    integer :: i, cnt(maxp), dsp(maxp), nc(2), nd(2)
    integer(kind=MPI_ADDRESS_KIND) :: ad2(2)
    logical :: ok
#ifdef GDTE_F08
    type(MPI_Request) :: q
    type(MPI_Datatype) :: ty(maxp), ty2(2)
#else
    integer :: q, ty(maxp), ty2(2)
#endif
    do i = 1, np
      cnt(i) = n
      dsp(i) = (i - 1) * n
      ty(i) = MPI_DOUBLE_PRECISION
    end do
    nc = n
    nd = [0, n]
    ad2 = [0_MPI_ADDRESS_KIND, int(8 * n, MPI_ADDRESS_KIND)]
    ty2 = MPI_DOUBLE_PRECISION

    ! Alltoall family: block i of b is from rank i-1, its block `rank`.
    call fill(a, b, 0)
    c0 = ft_coll_calls()
    call MPI_Alltoall(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, comm, ierr)
    call ok_ierr(ierr, 'MPI_Alltoall')
    call carried(dev, 1, 'MPI_Alltoall')
    call check(all([(block_is(b, i * n + 1, i, rank * n, 0), i = 0, np - 1)]), 'MPI_Alltoall data')
    call fill(a, b, 0)
    c0 = ft_coll_calls()
    call MPI_Ialltoall(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call ok_ierr(ierr, 'MPI_Ialltoall')
    call carried(dev, 1, 'MPI_Ialltoall')
    call check(all([(block_is(b, i * n + 1, i, rank * n, 0), i = 0, np - 1)]), 'MPI_Ialltoall data')
    call fill(a, b, 0)
    call MPI_Alltoallv(a, cnt, dsp, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, comm, ierr)
    call ok_ierr(ierr, 'MPI_Alltoallv')
    call check(all([(block_is(b, i * n + 1, i, rank * n, 0), i = 0, np - 1)]), 'MPI_Alltoallv data')
    call fill(a, b, 0)
    call MPI_Ialltoallv(a, cnt, dsp, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(all([(block_is(b, i * n + 1, i, rank * n, 0), i = 0, np - 1)]), 'MPI_Ialltoallv data')
    call fill(a, b, 0)
    call MPI_Ialltoallw(a, cnt, 8 * dsp, ty, b, cnt, 8 * dsp, ty, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(all([(block_is(b, i * n + 1, i, rank * n, 0), i = 0, np - 1)]), 'MPI_Ialltoallw data')
    ! In place: b carries this rank's data.
    call fill(b, a, 0)
    call MPI_Alltoall(MPI_IN_PLACE, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, comm, ierr)
    call ok_ierr(ierr, 'MPI_Alltoall (MPI_IN_PLACE)')
    call check(all([(block_is(b, i * n + 1, i, rank * n, 0), i = 0, np - 1)]), 'MPI_Alltoall (MPI_IN_PLACE) data')

    ! Allgather family: block i of b is rank i-1's first n elements.
    call fill(a, b, 0)
    call MPI_Allgather(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, comm, ierr)
    call check(ierr == 0 .and. all([(block_is(b, i * n + 1, i, 0, 0), i = 0, np - 1)]), 'MPI_Allgather')
    call fill(a, b, 0)
    call MPI_Iallgather(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. all([(block_is(b, i * n + 1, i, 0, 0), i = 0, np - 1)]), 'MPI_Iallgather')
    call fill(a, b, 0)
    call MPI_Allgatherv(a, n, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, comm, ierr)
    call check(ierr == 0 .and. all([(block_is(b, i * n + 1, i, 0, 0), i = 0, np - 1)]), 'MPI_Allgatherv')
    call fill(a, b, 0)
    call MPI_Iallgatherv(a, n, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. all([(block_is(b, i * n + 1, i, 0, 0), i = 0, np - 1)]), 'MPI_Iallgatherv')

    ! Rooted: gathers to the last rank, scatters from rank 0 (block i to rank i-1).
    call fill(a, b, 0)
    call MPI_Gather(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, np - 1, comm, ierr)
    ok = ierr == 0
    if (rank == np - 1) ok = ok .and. all([(block_is(b, i * n + 1, i, 0, 0), i = 0, np - 1)])
    call check(ok, 'MPI_Gather')
    call fill(a, b, 0)
    call MPI_Igather(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, np - 1, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    ok = ierr == 0
    if (rank == np - 1) ok = ok .and. all([(block_is(b, i * n + 1, i, 0, 0), i = 0, np - 1)])
    call check(ok, 'MPI_Igather')
    call fill(a, b, 0)
    call MPI_Gatherv(a, n, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, np - 1, comm, ierr)
    ok = ierr == 0
    if (rank == np - 1) ok = ok .and. all([(block_is(b, i * n + 1, i, 0, 0), i = 0, np - 1)])
    call check(ok, 'MPI_Gatherv')
    call fill(a, b, 0)
    call MPI_Igatherv(a, n, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, np - 1, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    ok = ierr == 0
    if (rank == np - 1) ok = ok .and. all([(block_is(b, i * n + 1, i, 0, 0), i = 0, np - 1)])
    call check(ok, 'MPI_Igatherv')
    call fill(a, b, 0)
    call MPI_Scatter(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, 0, comm, ierr)
    call check(ierr == 0 .and. block_is(b, 1, 0, rank * n, 0), 'MPI_Scatter')
    call fill(a, b, 0)
    call MPI_Iscatter(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, 0, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. block_is(b, 1, 0, rank * n, 0), 'MPI_Iscatter')
    call fill(a, b, 0)
    call MPI_Scatterv(a, cnt, dsp, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, 0, comm, ierr)
    call check(ierr == 0 .and. block_is(b, 1, 0, rank * n, 0), 'MPI_Scatterv')
    call fill(a, b, 0)
    call MPI_Iscatterv(a, cnt, dsp, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, 0, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. block_is(b, 1, 0, rank * n, 0), 'MPI_Iscatterv')
    ! Scatter in place at the root: the root's own block stays where it is.
    call fill(a, b, 0)
    if (rank == 0) then
      call MPI_Scatter(a, n, MPI_DOUBLE_PRECISION, MPI_IN_PLACE, n, MPI_DOUBLE_PRECISION, 0, comm, ierr)
    else
      call MPI_Scatter(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, 0, comm, ierr)
    end if
    ok = ierr == 0 .and. block_is(a, 1, rank, 0, 0)
    if (rank /= 0) ok = ok .and. block_is(b, 1, 0, rank * n, 0)
    call check(ok, 'MPI_Scatter (MPI_IN_PLACE)')
    call fill(a, b, 0)
    if (rank == 0) b(1:n) = a(1:n)
    call MPI_Bcast(b, n, MPI_DOUBLE_PRECISION, 0, comm, ierr)
    call check(ierr == 0 .and. block_is(b, 1, 0, 0, 0), 'MPI_Bcast')
    call fill(a, b, 0)
    if (rank == 0) b(1:n) = a(1:n)
    call MPI_Ibcast(b, n, MPI_DOUBLE_PRECISION, 0, comm, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. block_is(b, 1, 0, 0, 0), 'MPI_Ibcast')

    ! Neighborhood: on the line, block 1 goes to the left neighbour and comes from it (its second
    ! block), block 2 to and from the right (its first); on the ring every neighbour's first n.
    call fill(a, b, 0)
    c0 = ft_coll_calls()
    call MPI_Neighbor_alltoall(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, line, ierr)
    call carried(dev, 1, 'MPI_Neighbor_alltoall')
    call check(ierr == 0 .and. block_is(b, 1, left, n, 0) .and. block_is(b, n + 1, right, 0, 0), &
               'MPI_Neighbor_alltoall')
    call fill(a, b, 0)
    call MPI_Ineighbor_alltoall(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, line, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. block_is(b, 1, left, n, 0) .and. block_is(b, n + 1, right, 0, 0), &
               'MPI_Ineighbor_alltoall')
    call fill(a, b, 0)
    call MPI_Neighbor_alltoallv(a, nc, nd, MPI_DOUBLE_PRECISION, b, nc, nd, MPI_DOUBLE_PRECISION, line, ierr)
    call check(ierr == 0 .and. block_is(b, 1, left, n, 0) .and. block_is(b, n + 1, right, 0, 0), &
               'MPI_Neighbor_alltoallv')
    call fill(a, b, 0)
    call MPI_Ineighbor_alltoallv(a, nc, nd, MPI_DOUBLE_PRECISION, b, nc, nd, MPI_DOUBLE_PRECISION, line, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. block_is(b, 1, left, n, 0) .and. block_is(b, n + 1, right, 0, 0), &
               'MPI_Ineighbor_alltoallv')
    call fill(a, b, 0)
    call MPI_Neighbor_alltoallw(a, nc, ad2, ty2, b, nc, ad2, ty2, line, ierr)
    call check(ierr == 0 .and. block_is(b, 1, left, n, 0) .and. block_is(b, n + 1, right, 0, 0), &
               'MPI_Neighbor_alltoallw')
    call fill(a, b, 0)
    call MPI_Ineighbor_alltoallw(a, nc, ad2, ty2, b, nc, ad2, ty2, line, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. block_is(b, 1, left, n, 0) .and. block_is(b, n + 1, right, 0, 0), &
               'MPI_Ineighbor_alltoallw')
    call fill(a, b, 0)
    call MPI_Neighbor_allgather(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, ring, ierr)
    call check(ierr == 0 .and. block_is(b, 1, down, 0, 0) .and. block_is(b, n + 1, up, 0, 0), 'MPI_Neighbor_allgather')
    call fill(a, b, 0)
    call MPI_Ineighbor_allgather(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, ring, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. block_is(b, 1, down, 0, 0) .and. block_is(b, n + 1, up, 0, 0), &
               'MPI_Ineighbor_allgather')
    call fill(a, b, 0)
    call MPI_Neighbor_allgatherv(a, n, MPI_DOUBLE_PRECISION, b, nc, nd, MPI_DOUBLE_PRECISION, ring, ierr)
    call check(ierr == 0 .and. block_is(b, 1, down, 0, 0) .and. block_is(b, n + 1, up, 0, 0), &
               'MPI_Neighbor_allgatherv')
    call fill(a, b, 0)
    call MPI_Ineighbor_allgatherv(a, n, MPI_DOUBLE_PRECISION, b, nc, nd, MPI_DOUBLE_PRECISION, ring, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(ierr == 0 .and. block_is(b, 1, down, 0, 0) .and. block_is(b, n + 1, up, 0, 0), &
               'MPI_Ineighbor_allgatherv')

#ifdef GDTE_MPIX_F
    ! Persistent: set up once, started twice with new data (the round shifts every value).
    call MPIX_Alltoall_init(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Alltoall_init', 1)
    call MPIX_Alltoallv_init(a, cnt, dsp, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, comm, MPI_INFO_NULL, &
                             q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Alltoallv_init', 1)
    call MPIX_Alltoallw_init(a, cnt, 8 * dsp, ty, b, cnt, 8 * dsp, ty, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Alltoallw_init', 1)
    call MPIX_Allgather_init(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Allgather_init', 2)
    call MPIX_Allgatherv_init(a, n, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Allgatherv_init', 2)
    call MPIX_Gather_init(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, np - 1, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Gather_init', 3)
    call MPIX_Gatherv_init(a, n, MPI_DOUBLE_PRECISION, b, cnt, dsp, MPI_DOUBLE_PRECISION, np - 1, comm, MPI_INFO_NULL, &
                           q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Gatherv_init', 3)
    call MPIX_Scatter_init(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, 0, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Scatter_init', 4)
    call MPIX_Scatterv_init(a, cnt, dsp, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, 0, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Scatterv_init', 4)
    call MPIX_Bcast_init(a, n, MPI_DOUBLE_PRECISION, 0, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Bcast_init', 5)
    call MPIX_Neighbor_alltoall_init(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, line, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Neighbor_alltoall_init', 6)
    call MPIX_Neighbor_alltoallv_init(a, nc, nd, MPI_DOUBLE_PRECISION, b, nc, nd, MPI_DOUBLE_PRECISION, line, &
                                      MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Neighbor_alltoallv_init', 6)
    call MPIX_Neighbor_alltoallw_init(a, nc, ad2, ty2, b, nc, ad2, ty2, line, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Neighbor_alltoallw_init', 6)
    call MPIX_Neighbor_allgather_init(a, n, MPI_DOUBLE_PRECISION, b, n, MPI_DOUBLE_PRECISION, ring, MPI_INFO_NULL, q, &
                                      ierr)
    call pstarts(q, a, b, dev, 'MPIX_Neighbor_allgather_init', 7)
    call MPIX_Neighbor_allgatherv_init(a, n, MPI_DOUBLE_PRECISION, b, nc, nd, MPI_DOUBLE_PRECISION, ring, MPI_INFO_NULL, &
                                       q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Neighbor_allgatherv_init', 7)
    call MPIX_Allreduce_init(a, b, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Allreduce_init', 8)
    call MPIX_Reduce_init(a, b, n, MPI_DOUBLE_PRECISION, MPI_SUM, 0, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Reduce_init', 9)
    call MPIX_Reduce_scatter_block_init(a, b, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Reduce_scatter_block_init', 10)
    call MPIX_Reduce_scatter_init(a, b, cnt, MPI_DOUBLE_PRECISION, MPI_SUM, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Reduce_scatter_init', 10)
    call MPIX_Scan_init(a, b, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Scan_init', 11)
    call MPIX_Exscan_init(a, b, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, MPI_INFO_NULL, q, ierr)
    call pstarts(q, a, b, dev, 'MPIX_Exscan_init', 12)
#endif
  end subroutine

  ! The sum over ranks lo..hi of val(r, k, sh).
  pure real(8) function vsum(lo, hi, k, sh)
    integer, intent(in) :: lo, hi, k, sh
    integer :: r
    vsum = 0d0
    do r = lo, hi
      vsum = vsum + val(r, k, sh)
    end do
  end function

  ! What a persistent collective of kind `kind` left in a (Bcast) or b, round `sh`.
  logical function pdata(a, b, kind, sh)
    real(8), intent(in) :: a(:), b(:)
    integer, intent(in) :: kind, sh
    integer :: i, k
    pdata = .true.
    select case (kind)
    case (1)
      pdata = all([(block_is(b, i * n + 1, i, rank * n, sh), i = 0, np - 1)])
    case (2)
      pdata = all([(block_is(b, i * n + 1, i, 0, sh), i = 0, np - 1)])
    case (3)
      if (rank == np - 1) pdata = all([(block_is(b, i * n + 1, i, 0, sh), i = 0, np - 1)])
    case (4)
      pdata = block_is(b, 1, 0, rank * n, sh)
    case (5)
      pdata = block_is(a, 1, 0, 0, sh)
    case (6)
      pdata = block_is(b, 1, left, n, sh) .and. block_is(b, n + 1, right, 0, sh)
    case (7)
      pdata = block_is(b, 1, down, 0, sh) .and. block_is(b, n + 1, up, 0, sh)
    case (8)
      pdata = all([(b(k) == vsum(0, np - 1, k, sh), k = 1, n)])
    case (9)
      if (rank == 0) pdata = all([(b(k) == vsum(0, np - 1, k, sh), k = 1, n)])
    case (10)
      pdata = all([(b(k) == vsum(0, np - 1, rank * n + k, sh), k = 1, n)])
    case (11)
      pdata = all([(b(k) == vsum(0, rank, k, sh), k = 1, n)])
    case (12)
      if (rank > 0) pdata = all([(b(k) == vsum(0, rank - 1, k, sh), k = 1, n)])
    end select
  end function

  ! A persistent request on (a, b): started twice (MPI_Start, MPI_Startall) with new data, each
  ! round checked, then freed while inactive. gdte carries one collective per start on device
  ! arrays (kinds 1-7), stages one reduction per start where it stages reductions (8-12).
  subroutine pstarts(q, a, b, dev, what, kind)
#ifdef GDTE_F08
    type(MPI_Request), intent(inout) :: q
    type(MPI_Request) :: qs(1)
#else
    integer, intent(inout) :: q
    integer :: qs(1)
#endif
    real(8), intent(inout) :: a(:), b(:)
    logical, intent(in) :: dev
    character(*), intent(in) :: what
    integer, intent(in) :: kind
    integer :: sh
    integer(c_int64_t) :: r0, want
    call ok_ierr(ierr, what)
    do sh = 1, 2
      call fill(a, b, sh)
      c0 = ft_coll_calls()
      r0 = ft_reduce_staged()
      if (sh == 1) then
        call MPI_Start(q, ierr)
      else
        qs(1) = q
        call MPI_Startall(1, qs, ierr)
        q = qs(1)
      end if
      call ok_ierr(ierr, what // ': start')
      call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
      call ok_ierr(ierr, what // ': MPI_Wait')
      if (kind <= 7) then
        call carried(dev, 1, what)
      else
        want = 0
        if (dev .and. ft_expect_refuse() == 1) want = 1
        call check(ft_reduce_staged() - r0 == want, what // ': not staged by gdte as expected')
      end if
      call check(pdata(a, b, kind, sh), what // ': data')
    end do
    call MPI_Request_free(q, ierr)
    call ok_ierr(ierr, what // ': MPI_Request_free')
  end subroutine

  ! The calls once refused, on host arrays: they reach the MPI, with the data the program computes.
  subroutine refused_host()
    real(8) :: h(2 * n), g(n), t(n), o1(1), c1(1), r1(1)
    real(8), asynchronous :: w(2 * n)
    real(8), save :: bb(64 + 8 * n)
    integer(kind=MPI_ADDRESS_KIND) :: wsz, disp, psz, pos
    integer(kind=MPI_OFFSET_KIND) :: off, zero
    character(len=1) :: pk(16 * n)
    integer :: k, bsz
#ifdef GDTE_F08
    type(MPI_Win) :: win
    type(MPI_File) :: fh
    type(MPI_Request) :: q
    type(MPI_Status) :: st
    type(c_ptr) :: baddr
#else
    integer :: win, fh, q, st(MPI_STATUS_SIZE)
#endif
    do k = 1, 2 * n
      h(k) = val(rank, k, 0)
    end do
    w = -1d0
    ! One-sided under fences: my w(1:n) is written by the rank below me.
    wsz = 8 * size(w)
    call MPI_Win_create(w, wsz, 8, MPI_INFO_NULL, comm, win, ierr)
    call ok_ierr(ierr, 'MPI_Win_create')
    call MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN, ierr)
    disp = 0
    call MPI_Win_fence(0, win, ierr)
    call MPI_Put(h, n, MPI_DOUBLE_PRECISION, up, disp, n, MPI_DOUBLE_PRECISION, win, ierr)
    call ok_ierr(ierr, 'MPI_Put')
    call MPI_Win_fence(0, win, ierr)
    call MPI_F_sync_reg(w)
    call check(all([(w(k) == val(down, k, 0), k = 1, n)]), 'MPI_Put data')
    call MPI_Get(g, n, MPI_DOUBLE_PRECISION, up, disp, n, MPI_DOUBLE_PRECISION, win, ierr)
    call ok_ierr(ierr, 'MPI_Get')
    call MPI_Win_fence(0, win, ierr)
    call check(all([(g(k) == val(rank, k, 0), k = 1, n)]), 'MPI_Get data')
    call MPI_Accumulate(h, n, MPI_DOUBLE_PRECISION, up, disp, n, MPI_DOUBLE_PRECISION, MPI_SUM, win, ierr)
    call ok_ierr(ierr, 'MPI_Accumulate')
    call MPI_Win_fence(0, win, ierr)
    call MPI_F_sync_reg(w)
    call check(all([(w(k) == 2 * val(down, k, 0), k = 1, n)]), 'MPI_Accumulate data')
    ! The last element: -1 + 1 (Get_accumulate, result the old -1), fetched (Fetch_and_op,
    ! MPI_NO_OP), then swapped for 5 where it equals 0 (Compare_and_swap).
    disp = 2 * n - 1
    o1 = 1d0
    call MPI_Get_accumulate(o1, 1, MPI_DOUBLE_PRECISION, r1, 1, MPI_DOUBLE_PRECISION, up, disp, 1, &
                            MPI_DOUBLE_PRECISION, MPI_SUM, win, ierr)
    call ok_ierr(ierr, 'MPI_Get_accumulate')
    call MPI_Win_fence(0, win, ierr)
    call check(r1(1) == -1d0, 'MPI_Get_accumulate result')
    call MPI_Fetch_and_op(o1, r1, MPI_DOUBLE_PRECISION, up, disp, MPI_NO_OP, win, ierr)
    call ok_ierr(ierr, 'MPI_Fetch_and_op')
    call MPI_Win_fence(0, win, ierr)
    call check(r1(1) == 0d0, 'MPI_Fetch_and_op result')
    o1 = 5d0
    c1 = 0d0
    call MPI_Compare_and_swap(o1, c1, r1, MPI_DOUBLE_PRECISION, up, disp, win, ierr)
    call ok_ierr(ierr, 'MPI_Compare_and_swap')
    call MPI_Win_fence(0, win, ierr)
    call MPI_F_sync_reg(w)
    call check(r1(1) == 0d0 .and. w(2 * n) == 5d0, 'MPI_Compare_and_swap data')
    ! Request-based, under a passive-target lock: w(n+1:2n-1) of the rank above.
    disp = n
    call MPI_Win_lock(MPI_LOCK_SHARED, up, 0, win, ierr)
    call MPI_Rput(h(n + 1), n - 1, MPI_DOUBLE_PRECISION, up, disp, n - 1, MPI_DOUBLE_PRECISION, win, q, ierr)
    call ok_ierr(ierr, 'MPI_Rput')
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_Win_flush(up, win, ierr)
    g = -3d0
    call MPI_Rget(g, n - 1, MPI_DOUBLE_PRECISION, up, disp, n - 1, MPI_DOUBLE_PRECISION, win, q, ierr)
    call ok_ierr(ierr, 'MPI_Rget')
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call check(all([(g(k) == val(rank, n + k, 0), k = 1, n - 1)]), 'MPI_Rput/MPI_Rget data')
    call MPI_Raccumulate(h(n + 1), n - 1, MPI_DOUBLE_PRECISION, up, disp, n - 1, MPI_DOUBLE_PRECISION, MPI_SUM, win, &
                         q, ierr)
    call ok_ierr(ierr, 'MPI_Raccumulate')
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_Win_flush(up, win, ierr)
    call MPI_Rget_accumulate(h(n + 1), n - 1, MPI_DOUBLE_PRECISION, g, n - 1, MPI_DOUBLE_PRECISION, up, disp, n - 1, &
                             MPI_DOUBLE_PRECISION, MPI_NO_OP, win, q, ierr)
    call ok_ierr(ierr, 'MPI_Rget_accumulate')
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_Win_unlock(up, win, ierr)
    call check(all([(g(k) == 2 * val(rank, n + k, 0), k = 1, n - 1)]), 'MPI_Raccumulate/MPI_Rget_accumulate data')
    call MPI_Barrier(comm, ierr)
    call MPI_Win_free(win, ierr)
    call MPI_Win_create_dynamic(MPI_INFO_NULL, comm, win, ierr)
    call MPI_Win_attach(win, w, wsz, ierr)
    call ok_ierr(ierr, 'MPI_Win_attach')
    call MPI_Win_detach(win, w, ierr)
    call MPI_Win_free(win, ierr)

    ! MPI-IO: this rank's n doubles at byte 8*n*rank, through each kind of call; every write
    ! writes new values (val(rank, k, step)), read back by the matching read.
    call MPI_File_open(comm, 'fortran_calls_test.dat', MPI_MODE_CREATE + MPI_MODE_RDWR + MPI_MODE_DELETE_ON_CLOSE, &
                       MPI_INFO_NULL, fh, ierr)
    call ok_ierr(ierr, 'MPI_File_open')
    call MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN, ierr)
    off = 8 * n * rank
    zero = 0
    call io_step(t, g, 1)
    call MPI_File_write_at(fh, off, t, n, MPI_DOUBLE_PRECISION, st, ierr)
    call MPI_File_read_at(fh, off, g, n, MPI_DOUBLE_PRECISION, st, ierr)
    call io_check(t, g, 'MPI_File_write_at/read_at')
    call io_step(t, g, 2)
    call MPI_File_write_at_all(fh, off, t, n, MPI_DOUBLE_PRECISION, MPI_STATUS_IGNORE, ierr)
    call MPI_File_read_at_all(fh, off, g, n, MPI_DOUBLE_PRECISION, st, ierr)
    call io_check(t, g, 'MPI_File_write_at_all/read_at_all')
    call io_step(t, g, 3)
    call MPI_File_iwrite_at(fh, off, t, n, MPI_DOUBLE_PRECISION, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_File_iread_at(fh, off, g, n, MPI_DOUBLE_PRECISION, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call io_check(t, g, 'MPI_File_iwrite_at/iread_at')
    call io_step(t, g, 4)
    call MPI_File_iwrite_at_all(fh, off, t, n, MPI_DOUBLE_PRECISION, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_File_iread_at_all(fh, off, g, n, MPI_DOUBLE_PRECISION, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call io_check(t, g, 'MPI_File_iwrite_at_all/iread_at_all')
    call io_step(t, g, 5)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_write(fh, t, n, MPI_DOUBLE_PRECISION, st, ierr)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_read(fh, g, n, MPI_DOUBLE_PRECISION, st, ierr)
    call io_check(t, g, 'MPI_File_write/read')
    call io_step(t, g, 6)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_write_all(fh, t, n, MPI_DOUBLE_PRECISION, st, ierr)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_read_all(fh, g, n, MPI_DOUBLE_PRECISION, st, ierr)
    call io_check(t, g, 'MPI_File_write_all/read_all')
    call io_step(t, g, 7)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_iwrite(fh, t, n, MPI_DOUBLE_PRECISION, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_iread(fh, g, n, MPI_DOUBLE_PRECISION, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call io_check(t, g, 'MPI_File_iwrite/iread')
    call io_step(t, g, 8)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_iwrite_all(fh, t, n, MPI_DOUBLE_PRECISION, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_iread_all(fh, g, n, MPI_DOUBLE_PRECISION, q, ierr)
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call io_check(t, g, 'MPI_File_iwrite_all/iread_all')
    call io_step(t, g, 9)
    call MPI_File_write_at_all_begin(fh, off, t, n, MPI_DOUBLE_PRECISION, ierr)
    call MPI_File_write_at_all_end(fh, t, st, ierr)
    call MPI_File_read_at_all_begin(fh, off, g, n, MPI_DOUBLE_PRECISION, ierr)
    call MPI_File_read_at_all_end(fh, g, st, ierr)
    call io_check(t, g, 'MPI_File_write_at_all_begin/end, read_at_all_begin/end')
    call io_step(t, g, 10)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_write_all_begin(fh, t, n, MPI_DOUBLE_PRECISION, ierr)
    call MPI_File_write_all_end(fh, t, st, ierr)
    call MPI_File_seek(fh, off, MPI_SEEK_SET, ierr)
    call MPI_File_read_all_begin(fh, g, n, MPI_DOUBLE_PRECISION, ierr)
    call MPI_File_read_all_end(fh, g, st, ierr)
    call io_check(t, g, 'MPI_File_write_all_begin/end, read_all_begin/end')
    ! Shared file pointer: the ordered calls put the ranks' blocks in rank order, here from 0.
    call io_step(t, g, 11)
    call MPI_File_seek_shared(fh, zero, MPI_SEEK_SET, ierr)
    call MPI_File_write_ordered(fh, t, n, MPI_DOUBLE_PRECISION, st, ierr)
    call MPI_File_seek_shared(fh, zero, MPI_SEEK_SET, ierr)
    call MPI_File_read_ordered(fh, g, n, MPI_DOUBLE_PRECISION, st, ierr)
    call io_check(t, g, 'MPI_File_write_ordered/read_ordered')
    call io_step(t, g, 12)
    call MPI_File_seek_shared(fh, zero, MPI_SEEK_SET, ierr)
    call MPI_File_write_ordered_begin(fh, t, n, MPI_DOUBLE_PRECISION, ierr)
    call MPI_File_write_ordered_end(fh, t, st, ierr)
    call MPI_File_seek_shared(fh, zero, MPI_SEEK_SET, ierr)
    call MPI_File_read_ordered_begin(fh, g, n, MPI_DOUBLE_PRECISION, ierr)
    call MPI_File_read_ordered_end(fh, g, st, ierr)
    call io_check(t, g, 'MPI_File_write_ordered_begin/end, read_ordered_begin/end')
    ! Where a non-collective shared-pointer write lands depends on the ranks' timing: the calls
    ! must only succeed (and reads past the end read nothing).
    call MPI_File_seek_shared(fh, zero, MPI_SEEK_SET, ierr)
    call MPI_File_write_shared(fh, t, n, MPI_DOUBLE_PRECISION, st, ierr)
    call ok_ierr(ierr, 'MPI_File_write_shared')
    call MPI_File_iwrite_shared(fh, t, n, MPI_DOUBLE_PRECISION, q, ierr)
    call ok_ierr(ierr, 'MPI_File_iwrite_shared')
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_Barrier(comm, ierr)
    call MPI_File_seek_shared(fh, zero, MPI_SEEK_SET, ierr)
    call MPI_File_read_shared(fh, g, n, MPI_DOUBLE_PRECISION, st, ierr)
    call ok_ierr(ierr, 'MPI_File_read_shared')
    call MPI_File_iread_shared(fh, g, n, MPI_DOUBLE_PRECISION, q, ierr)
    call ok_ierr(ierr, 'MPI_File_iread_shared')
    call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
    call MPI_File_close(fh, ierr)

    ! Local: external32 packing round trip; a buffered send through an attached buffer.
    psz = size(pk)
    pos = 0
    call MPI_Pack_external('external32', h, n, MPI_DOUBLE_PRECISION, pk, psz, pos, ierr)
    call check(ierr == 0 .and. pos == 8 * n, 'MPI_Pack_external')
    pos = 0
    g = -3d0
    call MPI_Unpack_external('external32', pk, psz, pos, g, n, MPI_DOUBLE_PRECISION, ierr)
    call check(ierr == 0 .and. pos == 8 * n .and. all(g == h(1:n)), 'MPI_Unpack_external')
    bsz = 8 * size(bb)
    call MPI_Buffer_attach(bb, bsz, ierr)
    call ok_ierr(ierr, 'MPI_Buffer_attach')
    call MPI_Bsend(h, n, MPI_DOUBLE_PRECISION, up, 9, comm, ierr)
    call MPI_Recv(g, n, MPI_DOUBLE_PRECISION, down, 9, comm, MPI_STATUS_IGNORE, ierr)
    call check(all([(g(k) == val(down, k, 0), k = 1, n)]), 'MPI_Bsend through MPI_Buffer_attach')
#ifdef GDTE_F08
    call MPI_Buffer_detach(baddr, bsz, ierr)
#else
    call MPI_Buffer_detach(bb, bsz, ierr)
#endif
  end subroutine

  ! MPI-IO's rounds: t the values written (step `step`), g the read buffer, poisoned.
  subroutine io_step(t, g, step)
    real(8), intent(out) :: t(:), g(:)
    integer, intent(in) :: step
    integer :: k
    do k = 1, n
      t(k) = val(rank, k, step)
    end do
    g = -3d0
  end subroutine

  subroutine io_check(t, g, what)
    real(8), intent(in) :: t(:), g(:)
    character(*), intent(in) :: what
    call ok_ierr(ierr, what)
    call check(all(g == t), what // ' data')
  end subroutine

  ! Calls once refused on device memory, one of each family: carried now, in every mode.
  subroutine refused_device(a)
    real(8), intent(inout) :: a(:)
    real(8), asynchronous :: w(n)
    integer(kind=MPI_ADDRESS_KIND) :: wsz, disp, psz, pos
    integer(kind=MPI_OFFSET_KIND) :: off
    character(len=1) :: pk(8 * n)
    integer :: k, bsz
#ifdef GDTE_F08
    type(MPI_Win) :: win
    type(MPI_File) :: fh
    type(c_ptr) :: baddr
#else
    integer :: win, fh
#endif
    do k = 1, n
      w(k) = val(rank, k, 0)
    end do
    a = -1d0
    wsz = 8 * size(w)
    call MPI_Win_create(w, wsz, 8, MPI_INFO_NULL, comm, win, ierr)
    call MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN, ierr)
    call MPI_Win_fence(0, win, ierr)
    disp = 0
    call MPI_Get(a, n, MPI_DOUBLE_PRECISION, up, disp, n, MPI_DOUBLE_PRECISION, win, ierr)
    call refusal(ierr, .false., 'MPI_Get into device memory')
    call MPI_Win_fence(0, win, ierr)
    call check(all([(a(k) == val(up, k, 0), k = 1, n)]), 'MPI_Get into device memory: data')
    call MPI_Win_free(win, ierr)

    ! A window over device memory (a host copy for the MPI, merged at each fence and at
    ! MPI_Win_sync): the rank below puts its values into a.
    a = -1d0
    call MPI_Win_create(a, wsz, 8, MPI_INFO_NULL, comm, win, ierr)
    call refusal(ierr, .false., 'MPI_Win_create over device memory')
    call MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN, ierr)
    call MPI_Win_fence(0, win, ierr)
    call MPI_Put(w, n, MPI_DOUBLE_PRECISION, up, disp, n, MPI_DOUBLE_PRECISION, win, ierr)
    call refusal(ierr, .false., 'MPI_Put into a device window')
    call MPI_Win_fence(0, win, ierr)
    call check(all([(a(k) == val(down, k, 0), k = 1, n)]), 'MPI_Put into a device window: data')
    call MPI_Win_lock_all(0, win, ierr)
    call MPI_Win_sync(win, ierr)
    call refusal(ierr, .false., 'MPI_Win_sync of a device window')
    call MPI_Win_unlock_all(win, ierr)
    call MPI_Win_free(win, ierr)

    call MPI_File_open(comm, 'fortran_calls_test_dev.dat', MPI_MODE_CREATE + MPI_MODE_RDWR + MPI_MODE_DELETE_ON_CLOSE, &
                       MPI_INFO_NULL, fh, ierr)
    call MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN, ierr)
    off = 8 * n * rank
    call MPI_File_write_at(fh, off, a, n, MPI_DOUBLE_PRECISION, MPI_STATUS_IGNORE, ierr)
    call refusal(ierr, .false., 'MPI_File_write_at from device memory')
    call MPI_File_close(fh, ierr)

    psz = size(pk)
    pos = 0
    ! Carried now (never refused): external32 from device memory, the buffer of buffered sends.
    call MPI_Pack_external('external32', a, n, MPI_DOUBLE_PRECISION, pk, psz, pos, ierr)
    call refusal(ierr, .false., 'MPI_Pack_external from device memory')
    call check(pos == 8 * n, 'MPI_Pack_external from device memory: position')

    bsz = 8 * size(a)
    call MPI_Buffer_attach(a, bsz, ierr)
    call refusal(ierr, .false., 'MPI_Buffer_attach of device memory')
    bsz = -1
#ifdef GDTE_F08
    call MPI_Buffer_detach(baddr, bsz, ierr)
#else
    call MPI_Buffer_detach(a, bsz, ierr)
#endif
    call refusal(ierr, .false., 'MPI_Buffer_detach of device memory')
    call check(bsz == 8 * size(a), 'MPI_Buffer_detach of device memory: size')
    ! attached and detached again: the MPI holds no buffer now
    call MPI_Buffer_attach(a, bsz, ierr)
    call refusal(ierr, .false., 'MPI_Buffer_attach of device memory, again')
#ifdef GDTE_F08
    call MPI_Buffer_detach(baddr, bsz, ierr)
#else
    call MPI_Buffer_detach(a, bsz, ierr)
#endif
  end subroutine

  subroutine refusal(e, refused, what)
    integer, intent(in) :: e
    logical, intent(in) :: refused
    character(*), intent(in) :: what
    if (refused) then
      call check(e == MPI_ERR_BUFFER, what // ': not refused with MPI_ERR_BUFFER')
    else
      call check(e == MPI_SUCCESS, what // ': failed')
    end if
  end subroutine

end program
